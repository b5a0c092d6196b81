// Products of f32 activations with integer weights (I8: int8, one scale a row; Q4: int4,
// one scale per group of columns; docs/container.md). Each job's activation rows are
// quantized once to int8 blocks of 32 (quant::quantize_activations, or its AVX-512 version
// here, which gives the same bits); an output element is
//
//   y[s][o] = Σ_blocks (s_w·s_x) · isum,   isum = Σ_{i in block} q_w[i]·q_x[i]   (exact, int32)
//
// and the float part follows ONE fixed pattern on every ISA, so scalar, AVX2 and AVX-512
// give bitwise equal results, whatever the number of activation rows or threads (and whether
// integer weights are in column order or the lane order of engine/model/lane_order.h):
//
//   acc[0..15] = +0
//   for each block b in order:  acc[b % 16] = fma(s_w[b] * s_x[b], float(isum_b), acc[b % 16])
//   for h = 8, 4, 2, 1:         acc[i] = acc[i] + acc[i + h]   for i < h
//   y = acc[0]
//
// (s_w[b] is the scale of the weight group holding block b; the product s_w·s_x is a plain
// f32 multiply, then one fused multiply-add; float(isum) is exact since |isum| < 2^24.)
// AVX-512 keeps the 16 accumulators in one zmm and handles 16 blocks a step, for up to four
// activation rows per weight load (int4 blocks expanded once for all of them; one activation
// row meets a block of weight rows in one call; weights in the lane order, as the loader
// leaves them for VNNI, give the 16 block sums straight from dpbusd, with no reduction:
// rows_i8_lanes_vnni, rows_q4_lanes_vnni) — and from 24 activation rows on takes 16
// weight rows at once, a lane each, the 16 accumulators of a row then 16 vectors (the blocks'
// sums need no horizontal reduction: lanes_vnni); AVX2 keeps two ymm (blocks b%16 < 8 and
// ≥ 8) and handles 8 a step, likewise for up to four activation rows per weight load (int8
// magnitudes and int4 nibbles prepared once); the integer sums inside may be formed in any
// order, being exact (engine/cpu/x86/int_kernels_avx2.cpp, int_kernels_avx512.cpp). ARM64
// (engine/cpu/arm64/int_kernels.cpp): NEON widening
// multiplies, SDOT where the CPU has FEAT_DotProd, and SMMLA tiles of 2 weight rows × 2
// activation rows where it has FEAT_I8MM; each forms the block sums exactly and then the same
// float pattern.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/quant/quantize.h"

namespace inkling::cpu {

// One job's activations, quantized for integer weights. `q4` holds the same values with
// each block reordered as [elements 0,2,…,30, then 1,3,…,31] (the order of a packed int4
// block's low nibbles, then its high nibbles), for the SIMD int4 kernels; empty otherwise.
struct IntActivations {
    quant::QuantizedActivations a;
    platform::AlignedVector<std::int8_t> q4;
    // The q4 values of each row regrouped per four blocks (their even elements, then their odd
    // ones) for AVX-512 VNNI's int4 kernels of 1-4 rows (jobs of fewer than 12 rows); empty
    // where those do not run.
    platform::AlignedVector<std::int8_t> q4x4;
    // The int8 values of each row in the lane order (engine/model/lane_order.h), for AVX-512
    // VNNI's kernels of lane-packed int8 weights; `q4_lanes` the q4 order's values likewise,
    // for lane-packed int4 weights. Empty where those kernels do not run.
    platform::AlignedVector<std::int8_t> lanes, q4_lanes;
};
void prepare_int_activations(Isa isa, bool q4_order, const float* x, std::int64_t rows, std::int64_t cols,
                             IntActivations& out);

// Output rows [begin, end) of y = x·Wᵀ for an I8 or Q4 `w`: y[s·w.rows + o] for every
// activation row s. `x` comes from prepare_int_activations with the same `isa`.
void int_product_rows(Isa isa, const model::Matrix& w, const IntActivations& x, std::int64_t begin,
                      std::int64_t end, float* y);

// The kernels int_product_rows runs for `isa` ("scalar", "avx2", "avx512-vnni"; ARM64:
// "neon", "sdot", "smmla+sdot").
const char* int_kernel_name(Isa isa);

// Whether `isa`'s kernels read int8 and int4 weights in the lane order (Matrix::lane_packed;
// AVX-512 VNNI's do, and only they): the loader packs them so where this holds. A lane-packed
// matrix given to another ISA's kernels is an error, not a misread.
bool lane_order_pays(Isa isa);
// Whether models load with integer weights in the lane order: `--lane-order` (on by default) and the
// active ISA's kernels reading it.
bool lane_order_active();
void set_lane_order(bool on);

// Whether this CPU has the AVX-512 VNNI dot product the Avx512 integer kernels use (the
// Avx512 ISA falls back to the AVX2 integer kernels without it).
bool has_avx512_vnni();

}  // namespace inkling::cpu
