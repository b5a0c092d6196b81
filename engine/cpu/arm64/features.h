// What this ARM64 CPU can run (the kernel features the kernel reports through getauxval) and
// what this build compiled (cmake/arm64.cmake's probe), for the ISA dispatch of
// engine/cpu/kernels.cpp.
#pragma once

#include "engine/cpu/kernels.h"

namespace inkling::cpu::arm64 {

struct Features {
    bool asimd = false;    // NEON (every ARM64 CPU Linux runs on)
    bool dotprod = false;  // FEAT_DotProd: SDOT, UDOT (HWCAP_ASIMDDP)
    bool i8mm = false;     // FEAT_I8MM: SMMLA, USMMLA (HWCAP2_I8MM)
    bool bf16 = false;     // FEAT_BF16 (HWCAP2_BF16): reported, unused (bf16_matmul.cpp says why)
};
Features cpu_features();

// Whether this build has the SDOT / SMMLA kernels (the compiler could target them).
bool built_dotprod();
bool built_i8mm();

// The highest level the CPU has and this build compiled: I8mm, Dotprod, Neon (Scalar only
// without NEON).
Isa best_isa();

}  // namespace inkling::cpu::arm64
