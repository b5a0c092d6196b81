// The x86 versions of engine/cpu/int_kernels.h's kernels, each compiled for its ISA with
// __attribute__((target)); engine/cpu/int_kernels.cpp holds the generic ones, fills the
// kernel tables (int_kernel_table.h) from these and picks one. Every kernel gives the generic
// version's bits; int4 kernels take the activations in the q4 order (a block's even elements,
// then its odd ones), or the x4 or lane order where their names say so.
#pragma once

#include <cstdint>

#include "engine/cpu/int_kernel_table.h"
#include "engine/quant/quantize.h"

namespace inkling::cpu::x86 {

// ---- AVX2 + FMA (int_kernels_avx2.cpp): two ymm of accumulators, 8 blocks a step ---------
float dot_i8_avx2(const std::int8_t* w, const std::int8_t* x, const IntBlocks& k);
float dot_q4_avx2(const std::uint8_t* w, const std::int8_t* x, const IntBlocks& k);
// A packed int4 row as int8 in natural order (the AVX-512 VNNI set's unpack_q4 too).
void unpack_q4_avx2(const std::uint8_t* w, std::int64_t padded, std::int8_t* out);
// The multi-row kernels (IntKernels::many_*): int8, int8 rows of one scale, int4.
extern const ManyFn kI8ManyAvx2[kRowsPerLoad];
extern const ManyFn kI8RowScaleManyAvx2[kRowsPerLoad];
extern const ManyFn kQ4ManyAvx2[kRowsPerLoad];
// Activation quantization: quant::quantize_activations's values bit for bit, and the q4
// order in the same pass where `q4` is not null (the AVX2 kernels' activations, and
// AVX-512's without VNNI).
void quantize_avx2(const float* x, std::int64_t rows, std::int64_t cols, quant::QuantizedActivations& out,
                   std::int8_t* q4);

// ---- AVX-512 VNNI (int_kernels_avx512.cpp): one zmm of accumulators, 16 blocks a step ----
float dot_i8_vnni(const std::int8_t* w, const std::int8_t* x, const IntBlocks& k);
float dot_q4_vnni(const std::uint8_t* w, const std::int8_t* x, const IntBlocks& k);
// 16 weight rows a lane against many activation rows (IntKernels::lanes).
void lanes_vnni(bool q4, bool lane_packed, const std::uint8_t* w, std::int64_t row_bytes, const float* const* sw,
                const quant::QuantizedActivations& a, const std::int8_t* xq, std::int64_t y_stride, float* y);
// The multi-row kernels: int8, int8 rows of one scale, int4 (the q4 order), int4 (the x4
// order: IntActivations::q4x4); then for lane-packed weights (engine/model/lane_order.h) against
// activations in the lane order: int8, int8 rows of one scale, int4.
extern const ManyFn kI8ManyVnni[kRowsPerLoad];
extern const ManyFn kI8RowScaleManyVnni[kRowsPerLoad];
extern const ManyFn kQ4ManyVnni[kRowsPerLoad];
extern const ManyFn kQ4X4ManyVnni[kRowsPerLoad];
extern const ManyFn kI8LanesManyVnni[kRowsPerLoad];
extern const ManyFn kI8LanesRowScaleManyVnni[kRowsPerLoad];
extern const ManyFn kQ4LanesManyVnni[kRowsPerLoad];
// quantize_avx2's values and order with AVX-512.
void quantize_vnni(const float* x, std::int64_t rows, std::int64_t cols, quant::QuantizedActivations& out,
                   std::int8_t* q4);

}  // namespace inkling::cpu::x86
