// The function attributes that compile one kernel for an ARM64 feature the build's target
// may lack (cmake/arm64.cmake's probe defines INKLING_ARM64_<F>_BASE when the target has it,
// or INKLING_ARM64_<F>_ATTR, the attribute string the compiler took). Functions marked so
// run only where engine/cpu/arm64/features.cpp saw the feature.
#pragma once

#if defined(INKLING_ARM64_DOTPROD_BASE)
#define INKLING_HAVE_DOTPROD 1
#define INKLING_DOTPROD
#elif defined(INKLING_ARM64_DOTPROD_ATTR)
#define INKLING_HAVE_DOTPROD 1
#define INKLING_DOTPROD __attribute__((target(INKLING_ARM64_DOTPROD_ATTR)))
#endif

#if defined(INKLING_ARM64_I8MM_BASE)
#define INKLING_HAVE_I8MM 1
#define INKLING_I8MM
#elif defined(INKLING_ARM64_I8MM_ATTR)
#define INKLING_HAVE_I8MM 1
#define INKLING_I8MM __attribute__((target(INKLING_ARM64_I8MM_ATTR)))
#endif
