#include "engine/cpu/arm64/features.h"

#include <sys/auxv.h>

// The bits of <asm/hwcap.h>, spelled out for C libraries whose headers predate them.
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif

namespace inkling::cpu::arm64 {

Features cpu_features() {
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    Features f;
    f.asimd = (hw & HWCAP_ASIMD) != 0;
    f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
    f.i8mm = (hw2 & HWCAP2_I8MM) != 0;
    f.bf16 = (hw2 & HWCAP2_BF16) != 0;
    return f;
}

bool built_dotprod() {
#if defined(INKLING_ARM64_DOTPROD_BASE) || defined(INKLING_ARM64_DOTPROD_ATTR)
    return true;
#else
    return false;
#endif
}

bool built_i8mm() {
#if defined(INKLING_ARM64_I8MM_BASE) || defined(INKLING_ARM64_I8MM_ATTR)
    return true;
#else
    return false;
#endif
}

Isa best_isa() {
    const Features f = cpu_features();
    if (!f.asimd) return Isa::Scalar;
    // The SMMLA kernels use SDOT for the rows a 2×2 tile leaves, so I8mm needs both.
    if (f.i8mm && f.dotprod && built_i8mm() && built_dotprod()) return Isa::I8mm;
    if (f.dotprod && built_dotprod()) return Isa::Dotprod;
    return Isa::Neon;
}

}  // namespace inkling::cpu::arm64
