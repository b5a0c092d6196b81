// The per-block inputs of one integer product row (engine/cpu/int_kernels.h's pattern), shared
// by the generic kernels (int_kernels.cpp) and the per-architecture ones (x86/, arm64/).
#pragma once

#include <cstdint>

namespace inkling::cpu {

// One weight row · one activation row.
struct IntBlocks {
    const std::int32_t* xsums;  // Σ q_x of each block
    const float* sw;            // weight scale of each block
    const float* sx;            // activation scale of each block
    std::int64_t n;             // blocks
};

}  // namespace inkling::cpu
