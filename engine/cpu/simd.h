// The x86 intrinsics, for the kernel files that compile per-ISA functions with
// __attribute__((target(…))).
//
// GCC 12 warns about the deliberately undefined pass-through operand inside its own
// AVX-512 intrinsics (_mm512_undefined_*) once they are inlined: a known false positive,
// silenced for the files that include this one.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)  // clang (the fuzz build) has no such false positive
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
