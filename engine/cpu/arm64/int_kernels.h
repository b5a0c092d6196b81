// The ARM64 versions of engine/cpu/int_kernels.h's kernels: each forms every block's integer
// sum exactly (NEON widening multiplies, SDOT or SMMLA) and then the float pattern of
// int_kernels.h, so each gives the generic version's bits. int4 kernels take the activations
// in the q4 order (a block's even elements, then its odd ones), as the x86 ones do.
#pragma once

#include <cstdint>

#include "engine/cpu/int_blocks.h"

namespace inkling::cpu::arm64 {

// One weight row · one activation row: NEON (every ARM64 CPU).
float dot_i8_neon(const std::int8_t* w, const std::int8_t* x, const IntBlocks& k);
float dot_q4_neon(const std::uint8_t* w, const std::int8_t* x, const IntBlocks& k);
// The same with SDOT (FEAT_DotProd). In a build whose compiler had no SDOT these are the
// NEON ones (the Dotprod ISA is then never chosen: features.cpp).
float dot_i8_dotprod(const std::int8_t* w, const std::int8_t* x, const IntBlocks& k);
float dot_q4_dotprod(const std::uint8_t* w, const std::int8_t* x, const IntBlocks& k);
// Two weight rows w[0], w[1] × two activation rows x[0], x[1] with SMMLA (FEAT_I8MM):
// out = [w0·x0, w0·x1, w1·x0, w1·x1], with k[] in that order. Without SMMLA in the build:
// four SDOT (or NEON) dots.
void tile_i8_i8mm(const std::uint8_t* const* w, const std::int8_t* const* x, const IntBlocks* k, float* out);
void tile_q4_i8mm(const std::uint8_t* const* w, const std::int8_t* const* x, const IntBlocks* k, float* out);

}  // namespace inkling::cpu::arm64
