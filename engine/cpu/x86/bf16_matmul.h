// The x86 versions of engine/cpu/bf16_matmul.h's kernels (each compiled for its ISA with
// __attribute__((target))); engine/cpu/bf16_matmul.cpp holds the generic ones and picks.
// Every function here gives the generic version's bits.
#pragma once

#include <cstdint>

#include "engine/cpu/bf16_matmul.h"

namespace inkling::cpu::x86 {

// AVX2 + FMA: tiles of activation rows × weight rows, an element's 16 lanes in two ymm.
void bf16_rows_avx2(const model::Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end,
                    float* y);
// AVX-512 F/BW: tiles of activation rows × weight rows, FMA on f32-packed activations.
void bf16_rows_avx512(const model::Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end,
                      float* y);
// AVX-512 BF16: the same tiles with vdpbf16ps on bf16-packed (rounded) activations.
void bf16_rows_avx512_dot(const model::Matrix& w, const Bf16Activations& x, std::int64_t begin,
                          std::int64_t end, float* y);
// Packs rows of `x` as prepare_bf16_activations does (out's sizes already set).
void pack_avx512(bool round, const float* x, Bf16Activations& out);

}  // namespace inkling::cpu::x86
