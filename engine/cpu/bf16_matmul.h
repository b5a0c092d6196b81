// Products of activations with bf16 weights, n ≥ 1 rows, in one fixed order per output
// element on every ISA, so a row's result never depends on the batch it came in, the
// thread count, the tiling or the ISA (scalar, AVX2, AVX-512 F, AVX-512 BF16):
//
//   a = the activation row as it is (Numerics::Exact) or rounded to bf16 (Numerics::Bf16:
//       round to nearest even, subnormals to signed zero, NaN kept quiet — what
//       vcvtneps2bf16 computes)
//   acc[0..15] = +0
//   for each chunk c of 32 columns (columns ≥ cols count as +0):
//       for j < 16:  acc[j] = fma(w[32c+2j+1], a[32c+2j+1], acc[j])
//                    acc[j] = fma(w[32c+2j],   a[32c+2j],   acc[j])
//   for h = 8, 4, 2, 1:  acc[i] = acc[i] + acc[i + h]   for i < h
//   y = acc[0]
//
// The chunk step is exactly one lane of vdpbf16ps (odd pair element first, each addition
// rounded; a product of two bf16 values is exact in f32), so with Numerics::Bf16 the
// AVX-512 BF16 dot product and the f32 FMA kernels give the same bits — except where a
// product or partial sum is subnormal, which vdpbf16ps flushes to zero. With
// Numerics::Exact the same pattern runs on f32 activations through FMA (no rounding).
//
// Which kernel runs where (engine/cpu/x86/bf16_matmul.cpp): AVX-512 tiles of several
// activation rows × several weight rows with the activations packed once per call, weight
// blocks kept in L2 while every activation tile passes over them; AVX2 the same tiles on 16
// ymm (an element's lanes in two registers: one activation row × 4 weight rows at decode,
// 3 × 3 tiles of one half of the lanes at a time over L2 blocks from 7 rows on); scalar
// computes one element at a time. vdpbf16ps is used only with Numerics::Bf16 and where it is the
// faster of the two (set_bf16_dot_product; on Intel cores it issues at half the FMA rate,
// on AMD Zen 4 at twice it). ARM64 (engine/cpu/arm64/bf16_matmul.cpp): NEON FMA, one element
// at a time, the 16 lanes in four q registers; the same kernel on every ARM64 level.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/kernels.h"
#include "platform/aligned_vector.h"

namespace inkling::cpu {

// One job's activations, packed for the bf16 kernels. `f32` (FMA kernels): per chunk of 32
// columns the 16 odd-indexed values, then the 16 even-indexed ones; `bf16` (vdpbf16ps):
// the rounded values in column order. Rows are zero-padded to a whole chunk, `stride`
// elements apart (a little more than the padded width, so rows don't alias in L1).
struct Bf16Activations {
    std::int64_t rows = 0, cols = 0, chunks = 0, stride = 0;
    bool dot = false;  // packed for vdpbf16ps (bf16) rather than FMA (f32)
    platform::AlignedVector<float> f32;  // rows start on cache lines (the stride is a multiple of 32)
    platform::AlignedVector<std::uint16_t> bf16;
};

// The bf16 value vcvtneps2bf16 gives for `v`.
std::uint16_t round_to_bf16(float v);

void prepare_bf16_activations(Isa isa, Numerics numerics, const float* x, std::int64_t rows, std::int64_t cols,
                              Bf16Activations& out);

// Output rows [begin, end) of y = x·Wᵀ for a BF16 `w`: y[s·w.rows + o] for every activation
// row s. `x` comes from prepare_bf16_activations with the same `isa`.
void bf16_product_rows(Isa isa, const model::Matrix& w, const Bf16Activations& x, std::int64_t begin,
                       std::int64_t end, float* y);

// The kernel bf16_product_rows runs for `isa` and `numerics` ("scalar", "avx2", "avx512",
// "avx512-bf16dot", "neon-fma").
const char* bf16_kernel_name(Isa isa, Numerics numerics);

// Whether this CPU has AVX-512 BF16 (vdpbf16ps, vcvtneps2bf16) with the F/BW/VL it needs.
bool has_avx512_bf16();
// Whether Numerics::Bf16 products on the Avx512 ISA use vdpbf16ps (same bits as the FMA
// kernels but for subnormals). Default: on AMD CPUs that have it, off elsewhere; `on`
// throws std::runtime_error where has_avx512_bf16() is false. For benchmarks and tests.
bool bf16_dot_product_active();
void set_bf16_dot_product(bool on);
// Whether a one-row product (decode) on x86 takes each thread's weight rows in 4 (AVX2) or 8
// (AVX-512) contiguous parts, a tile holding the next row of each, so that every stream runs on
// through memory; otherwise a tile holds adjacent rows (streams of one row each, sharing
// pages). Same bits either way. Default: on AMD CPUs (mid-model decode against the read loop:
// Zen 3 0.46 -> 0.73-0.84, Zen 4 0.48-0.55 -> 0.72-0.76), off elsewhere (Intel Sapphire Rapids
// read 5-10 % slower so).
// For benchmarks and tests.
bool bf16_decode_interleave_active();
void set_bf16_decode_interleave(bool on);

}  // namespace inkling::cpu
