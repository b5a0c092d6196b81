// The ARM64 version of engine/cpu/bf16_matmul.h's kernel (engine/cpu/bf16_matmul.cpp picks
// it for every ARM64 ISA level); it gives the generic version's bits.
#pragma once

#include <cstdint>

#include "engine/cpu/bf16_matmul.h"

namespace inkling::cpu::arm64 {

// NEON FMA: one output element at a time, the 16 lanes of the pattern in four q registers,
// on activations packed by the generic packer (the f32 layout).
void bf16_rows_neon(const model::Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end,
                    float* y);

}  // namespace inkling::cpu::arm64
