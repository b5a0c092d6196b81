// x86 f32 kernels (x86/f32_kernels.h), each compiled for its ISA with
// __attribute__((target)). dot_avx2, dot_avx512 and dot4_avx512 keep cpu::dot's one order
// (kernels.h): 64 fused multiply-add sums, element i into sum i mod 64, then halves added.
#include "engine/cpu/x86/f32_kernels.h"

#include <algorithm>

#include "engine/cpu/simd.h"

namespace inkling::cpu::x86 {

using model::DType;
using model::Matrix;

constexpr std::int64_t kDotLanes = 64;  // dot()'s sums (kernels.h)

// ---- AVX2 + FMA + F16C ---------------------------------------------------------------
static __attribute__((target("avx2,fma"))) float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

// dot()'s order in eight registers of eight sums (sum 8k + l in lane l of s[k]); a last
// partial block of 64 loads zeros past n, as the reference's +0.
static __attribute__((target("avx2,fma"))) inline __m256i lanes_below(std::int64_t left) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<std::int64_t>(left, 8))), index);
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, std::int64_t n) {
    __m256 s[8];
    for (auto& v : s) v = _mm256_setzero_ps();
    std::int64_t i = 0;
    for (; i + kDotLanes <= n; i += kDotLanes)
        for (int k = 0; k < 8; ++k)
            s[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), s[k]);
    if (i < n)
        for (int k = 0; k < 8; ++k) {
            const std::int64_t at = i + 8 * k;
            const __m256i m = lanes_below(n - at);  // all-false once at ≥ n: loads nothing
            s[k] = _mm256_fmadd_ps(_mm256_maskload_ps(a + std::min(at, n), m),
                                   _mm256_maskload_ps(b + std::min(at, n), m), s[k]);
        }
    for (int k = 0; k < 4; ++k) s[k] = _mm256_add_ps(s[k], s[k + 4]);  // halves of 32
    s[0] = _mm256_add_ps(s[0], s[2]);                                   // of 16
    s[1] = _mm256_add_ps(s[1], s[3]);
    return hsum256(_mm256_add_ps(s[0], s[1]));  // of 8, then 4, 2, 1 within the register
}

// Product rounded, then the sum: the bits of the scalar loop x86-64 compiles (this target has
// no FMA for the compiler to fuse them into).
static __attribute__((target("avx2"))) void axpy_avx2(float a, const float* x, std::int64_t n, float* y) {
    const __m256 av = _mm256_set1_ps(a);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(av, _mm256_loadu_ps(x + i))));
    for (; i < n; ++i) y[i] += a * x[i];
}

__attribute__((target("avx2,fma"))) void dots_avx2(const float* a, const float* b, std::int64_t stride,
                                                    std::int64_t rows, std::int64_t n, float* out) {
    for (std::int64_t r = 0; r < rows; ++r) out[r] = dot_avx2(a, b + r * stride, n);
}

__attribute__((target("avx2"))) void axpys_avx2(const float* a, const float* x, std::int64_t stride, std::int64_t rows,
                                                std::int64_t n, float* y) {
    for (std::int64_t r = 0; r < rows; ++r) axpy_avx2(a[r], x + r * stride, n, y);
}

__attribute__((target("avx2,fma,f16c"))) void row_avx2(const Matrix& m, std::int64_t r, float* out) {
    const std::int64_t n = m.cols;
    if (m.dtype != DType::BF16 && m.dtype != DType::F16) return model::row_to_f32(m, r, out);
    const auto* h = reinterpret_cast<const std::uint16_t*>(m.row(r));
    std::int64_t i = 0;
    if (m.dtype == DType::BF16) {
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
            _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        for (; i < n; ++i) out[i] = model::bf16_to_f32(h[i]);
    } else {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
        for (; i < n; ++i) out[i] = model::f16_to_f32(h[i]);
    }
}

// ---- AVX-512 -------------------------------------------------------------------------
// dot()'s order in four registers of 16 sums (sum 16k + l in lane l of s[k]).
static __attribute__((target("avx512f"))) inline __mmask16 lanes_below16(std::int64_t left) {
    return left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << left) - 1);
}

// The halves of dot()'s 64 sums added: of 32 and 16 across the registers, then of 8, 4, 2
// and 1 within one — spelled out, as _mm512_reduce_add_ps's order is the compiler's.
static __attribute__((target("avx512f"))) inline float sum_halves_avx512(__m512 s0, __m512 s1, __m512 s2, __m512 s3) {
    const __m512 t = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1));
    return hsum256(_mm256_add_ps(_mm512_castps512_ps256(t), hi));
}

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, std::int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    std::int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    if (i < n) {
        const __mmask16 k0 = lanes_below16(n - i), k1 = lanes_below16(n - i - 16), k2 = lanes_below16(n - i - 32),
                        k3 = lanes_below16(n - i - 48);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k0, a + i), _mm512_maskz_loadu_ps(k0, b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k1, a + i + 16), _mm512_maskz_loadu_ps(k1, b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k2, a + i + 32), _mm512_maskz_loadu_ps(k2, b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k3, a + i + 48), _mm512_maskz_loadu_ps(k3, b + i + 48), s3);
    }
    return sum_halves_avx512(s0, s1, s2, s3);
}

// y + a·x, product rounded, then the sum. Spelled with the rounding-mode intrinsics: the
// plain _mm512_mul_ps/_mm512_add_ps are vector operators that GCC (-ffp-contract=fast, the
// GNU default) fuses into an FMA where the target has one, which AVX-512F's does.
static __attribute__((target("avx512f"))) inline __m512 add_product_avx512(__m512 y, __m512 a, __m512 x) {
    return _mm512_add_round_ps(y, _mm512_mul_round_ps(a, x, _MM_FROUND_CUR_DIRECTION), _MM_FROUND_CUR_DIRECTION);
}

__attribute__((target("avx512f"))) void dots_avx512(const float* a, const float* b, std::int64_t stride,
                                                     std::int64_t rows, std::int64_t n, float* out) {
    for (std::int64_t r = 0; r < rows; ++r) out[r] = dot_avx512(a, b + r * stride, n);
}

// y += Σ_r a[r]·x_r, the rows in order; up to 64 columns of y stay in registers across rows.
__attribute__((target("avx512f"))) void axpys_avx512(const float* a, const float* x, std::int64_t stride,
                                                      std::int64_t rows, std::int64_t n, float* y) {
    std::int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16), y2 = _mm512_loadu_ps(y + i + 32),
               y3 = _mm512_loadu_ps(y + i + 48);
        for (std::int64_t r = 0; r < rows; ++r) {
            const __m512 av = _mm512_set1_ps(a[r]);
            const float* xr = x + r * stride + i;
            y0 = add_product_avx512(y0, av, _mm512_loadu_ps(xr));
            y1 = add_product_avx512(y1, av, _mm512_loadu_ps(xr + 16));
            y2 = add_product_avx512(y2, av, _mm512_loadu_ps(xr + 32));
            y3 = add_product_avx512(y3, av, _mm512_loadu_ps(xr + 48));
        }
        _mm512_storeu_ps(y + i, y0);
        _mm512_storeu_ps(y + i + 16, y1);
        _mm512_storeu_ps(y + i + 32, y2);
        _mm512_storeu_ps(y + i + 48, y3);
    }
    for (; i < n; i += 16) {
        const __mmask16 k = lanes_below16(n - i);
        __m512 y0 = _mm512_maskz_loadu_ps(k, y + i);
        for (std::int64_t r = 0; r < rows; ++r)
            y0 = add_product_avx512(y0, _mm512_set1_ps(a[r]), _mm512_maskz_loadu_ps(k, x + r * stride + i));
        _mm512_mask_storeu_ps(y + i, k, y0);
    }
}

// Four activation rows against one weight row: each row's sum is formed exactly as
// dot_avx512 forms it (same accumulators, same order), so results are bitwise equal to
// four dot_avx512 calls while the weight row is loaded once.
__attribute__((target("avx512f"))) void dot4_avx512(const float* a, const float* const* b, std::int64_t n,
                                                     float* out) {
    __m512 s[4][4];
    for (auto& row : s)
        for (auto& acc : row) acc = _mm512_setzero_ps();
    std::int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512 w0 = _mm512_loadu_ps(a + i), w1 = _mm512_loadu_ps(a + i + 16), w2 = _mm512_loadu_ps(a + i + 32),
                     w3 = _mm512_loadu_ps(a + i + 48);
        for (int r = 0; r < 4; ++r) {
            s[r][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(b[r] + i), s[r][0]);
            s[r][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(b[r] + i + 16), s[r][1]);
            s[r][2] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(b[r] + i + 32), s[r][2]);
            s[r][3] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(b[r] + i + 48), s[r][3]);
        }
    }
    if (i < n)
        for (int q = 0; q < 4; ++q) {
            const __mmask16 k = lanes_below16(n - i - 16 * q);
            const __m512 w = _mm512_maskz_loadu_ps(k, a + i + 16 * q);
            for (int r = 0; r < 4; ++r) s[r][q] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k, b[r] + i + 16 * q), s[r][q]);
        }
    for (int r = 0; r < 4; ++r) out[r] = sum_halves_avx512(s[r][0], s[r][1], s[r][2], s[r][3]);
}

__attribute__((target("avx512f"))) void row_avx512(const Matrix& m, std::int64_t r, float* out) {
    const std::int64_t n = m.cols;
    if (m.dtype != DType::BF16 && m.dtype != DType::F16) return model::row_to_f32(m, r, out);
    const auto* h = reinterpret_cast<const std::uint16_t*>(m.row(r));
    std::int64_t i = 0;
    if (m.dtype == DType::BF16) {
        for (; i + 16 <= n; i += 16) {
            __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
            _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
        for (; i < n; ++i) out[i] = model::bf16_to_f32(h[i]);
    } else {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
        for (; i < n; ++i) out[i] = model::f16_to_f32(h[i]);
    }
}

}  // namespace inkling::cpu::x86
