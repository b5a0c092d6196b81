// What the x86 integer kernel files (int_kernels_avx2.cpp, int_kernels_avx512.cpp) share:
// the block size, the prefetch distance, the loop that turns a one-row kernel into a table's
// multi-row entry, and the last steps of the float pattern on a ymm (int_kernels.h).
#pragma once

#include <cstdint>

#include "engine/cpu/int_kernel_table.h"
#include "engine/cpu/simd.h"
#include "engine/quant/quantize.h"

namespace inkling::cpu::x86 {

using Blocks = IntBlocks;
constexpr std::int64_t kB = quant::kBlock;
// Weights are read once, front to back; prefetching this far ahead keeps more of the
// stream in flight than the hardware prefetcher does alone (decode at n = 1 is bound by it).
constexpr std::int64_t kPrefetch = 2048;

using RowsFn = void (*)(const std::uint8_t*, const std::int8_t* const*, const Blocks*, float*);

// A ManyFn's loop over the kernel `Row` (a RowsFn for R rows), for the per-ISA entries
// (many_avx2, many_vnni) to take inline: on short rows (1,024 columns: two steps of 16
// blocks) a call a row, its setup and its final sums' chains weighed as much as a step. One
// row writes in place.
template <RowsFn Row, int R>
inline void each_row(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t count, const std::int8_t* const* x,
                     const Blocks* k, const float* const* sw, float* y, std::int64_t y_stride) {
    for (std::int64_t i = 0; i < count; ++i) {
        Blocks ki[R];
        for (int r = 0; r < R; ++r) ki[r] = {k[r].xsums, sw[i], k[r].sx, k[r].n};
        if constexpr (R == 1) {
            Row(w + i * row_bytes, x, ki, y + i);
        } else {
            float out[R];
            Row(w + i * row_bytes, x, ki, out);
            for (int r = 0; r < R; ++r) y[r * y_stride + i] = out[r];
        }
    }
}

// The one-row entry (IntKernels::dot_*) of a kernel set whose multi-row kernel takes R = 1:
// that kernel on one row. W is the weights' element type (int8, or packed int4 bytes).
template <RowsFn One, class W>
float one_row(const W* w, const std::int8_t* x, const Blocks& k) {
    float out;
    One(reinterpret_cast<const std::uint8_t*>(w), &x, &k, &out);
    return out;
}

#define INKLING_AVX2 __attribute__((target("avx2,fma")))
// Entry points take their helpers inline (flatten): see INKLING_VNNI_ENTRY
// (int_kernels_avx512.cpp).
#define INKLING_AVX2_ENTRY INKLING_AVX2 __attribute__((flatten, aligned(64)))

// The tree of the pattern from h = 8 on: `h8` holds acc[i] + acc[i + 8], i < 8.
INKLING_AVX2 inline float finish8_avx2(__m256 h8) {
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

}  // namespace inkling::cpu::x86
