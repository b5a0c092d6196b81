// x86 integer kernels for AVX2 + FMA (x86/int_kernels.h; the pattern they keep is
// engine/cpu/int_kernels.h's).
#include "engine/cpu/x86/int_kernels.h"

#include <algorithm>

#include "engine/cpu/x86/int_common.h"

namespace inkling::cpu::x86 {
namespace {

// The AVX2 kernels: one weight row against R activation rows (R = 1 at decode), each block of
// weights loaded and prepared once and met by every row. A row's 8 blocks a step become
// their 8 exact sums in block order (hadd tree), then one fma into acc[(b / 8) % 2] — lanes
// i < 8 of the two vectors are the pattern's acc[i] and acc[i + 8].
// int8: |w|·sign(x, w) keeps maddubs' 16-bit pair sums below saturation (2·127·127 < 32767).
template <bool RowScale>
struct I8Avx2Rows {
    const std::int8_t* w;
    static constexpr int kShift = 0;
    static constexpr bool kRowScale = RowScale;
    struct Prep {
        __m256i mag, sgn;
    };
    INKLING_AVX2 Prep prep(std::int64_t b) const {
        if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(w + b * kB) + kPrefetch, _MM_HINT_T0);
        const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * kB));
        return {_mm256_abs_epi8(wv), wv};
    }
    INKLING_AVX2 static __m256i sum(const Prep& p, const std::int8_t* x) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(p.mag, _mm256_sign_epi8(xv, p.sgn)), _mm256_set1_epi16(1));
    }
};

// int4: nibble ^ 8 is q + 8 ∈ [0, 15] (unsigned), so maddubs gives Σ (q+8)·x and the
// block's Σx·8 is taken back afterwards. `x` is in the q4 order (low nibbles, then high).
struct Q4Avx2Rows {
    const std::uint8_t* w;
    static constexpr int kShift = 3;  // offset 8
    static constexpr bool kRowScale = false;
    struct Prep {
        __m256i u;
    };
    INKLING_AVX2 Prep prep(std::int64_t b) const {
        if (b % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(w + b * kB / 2) + kPrefetch, _MM_HINT_T0);
        const __m128i wb = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + b * kB / 2)),
                                         _mm_set1_epi8(static_cast<char>(0x88)));
        const __m256i z = _mm256_inserti128_si256(_mm256_castsi128_si256(wb), _mm_srli_epi16(wb, 4), 1);
        return {_mm256_and_si256(z, _mm256_set1_epi8(0x0f))};
    }
    INKLING_AVX2 static __m256i sum(const Prep& p, const std::int8_t* x) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(p.u, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))),
                                 _mm256_set1_epi16(1));
    }
};

// Blocks [b, b + 4) of every row, through the first two levels of the tree: h[r] =
// hadd(hadd(p0, p1), hadd(p2, p3)). Unless `Full`, blocks at or past `n` count as zero sums.
template <class K, int R, bool Full>
INKLING_AVX2 inline void quad_avx2(const K& kern, const std::int8_t* const* x, std::int64_t b, std::int64_t n,
                                   __m256i* h) {
    __m256i h2[R];
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
        const std::int64_t b0 = b + 2 * half, b1 = b0 + 1;
        const bool have0 = Full || b0 < n, have1 = Full || b1 < n;
        typename K::Prep p0{}, p1{};
        if (have0) p0 = kern.prep(b0);
        if (have1) p1 = kern.prep(b1);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m256i s0 = have0 ? K::sum(p0, x[r] + b0 * kB) : _mm256_setzero_si256();
            const __m256i s1 = have1 ? K::sum(p1, x[r] + b1 * kB) : _mm256_setzero_si256();
            const __m256i pair = _mm256_hadd_epi32(s0, s1);
            if (half == 0) h2[r] = pair;
            else h[r] = _mm256_hadd_epi32(h2[r], pair);
        }
    }
}

// The float part of blocks [b, b + 8) (fewer past n unless `Full`) for every row.
template <class K, int R, bool Full>
INKLING_AVX2 inline void fold8_avx2(const K& kern, const std::int8_t* const* x, const Blocks* k, std::int64_t b,
                                    __m256 (&acc)[R][2]) {
    const std::int64_t n = k[0].n;
    __m256i lo[R], hi[R];
    quad_avx2<K, R, Full>(kern, x, b, n, lo);
    quad_avx2<K, R, Full>(kern, x, b + 4, n, hi);
    const __m256i mask = Full ? _mm256_set1_epi32(-1)
                              : _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - b)),
                                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(lo[r], hi[r], 0x20),
                                        _mm256_permute2x128_si256(lo[r], hi[r], 0x31));
        if (K::kShift) {
            const __m256i xs = Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[r].xsums + b))
                                    : _mm256_maskload_epi32(k[r].xsums + b, mask);
            isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(xs, K::kShift));
        }
        __m256 sw;
        if constexpr (K::kRowScale) sw = _mm256_set1_ps(k[r].sw[0]);
        else sw = Full ? _mm256_loadu_ps(k[r].sw + b) : _mm256_maskload_ps(k[r].sw + b, mask);
        const __m256 sx = Full ? _mm256_loadu_ps(k[r].sx + b) : _mm256_maskload_ps(k[r].sx + b, mask);
        __m256& a = acc[r][(b / 8) % 2];
        const __m256 next = _mm256_fmadd_ps(_mm256_mul_ps(sw, sx), _mm256_cvtepi32_ps(isum), a);
        a = Full ? next : _mm256_blendv_ps(a, next, _mm256_castsi256_ps(mask));
    }
}

template <class K, int R>
INKLING_AVX2 void dot_avx2_rows(const K& kern, const std::int8_t* const* x, const Blocks* k, float* out) {
    const std::int64_t n = k[0].n;
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    std::int64_t b = 0;
    for (; b + 8 <= n; b += 8) fold8_avx2<K, R, true>(kern, x, k, b, acc);
    if (b < n) fold8_avx2<K, R, false>(kern, x, k, b, acc);
    for (int r = 0; r < R; ++r) out[r] = finish8_avx2(_mm256_add_ps(acc[r][0], acc[r][1]));
}

template <int R, bool RowScale = false>
INKLING_AVX2_ENTRY void rows_i8_avx2(const std::uint8_t* w, const std::int8_t* const* x, const Blocks* k, float* out) {
    dot_avx2_rows<I8Avx2Rows<RowScale>, R>(I8Avx2Rows<RowScale>{reinterpret_cast<const std::int8_t*>(w)}, x, k, out);
}
template <int R>
INKLING_AVX2_ENTRY void rows_q4_avx2(const std::uint8_t* w, const std::int8_t* const* x, const Blocks* k, float* out) {
    dot_avx2_rows<Q4Avx2Rows, R>(Q4Avx2Rows{w}, x, k, out);
}

// Inlined into the loop (flatten) where that measured faster; each_row<Row, R> itself where
// the kernel's registers are full and inlined it spilled (int4 against several activation
// rows — one core over weights in L2, 1,024 columns, 2 rows: AVX2 11.4 GB/s called, 10.5
// inlined; VNNI's x4 kernel for 4 rows 11.2 called, 10.7 inlined). The parameters are
// ManyFn's, taken from the table's type.
template <RowsFn Row, int R, class... A>
INKLING_AVX2_ENTRY void many_avx2(A... a) {
    each_row<Row, R>(a...);
}

}  // namespace

INKLING_AVX2 void unpack_q4_avx2(const std::uint8_t* w, std::int64_t padded, std::int8_t* out) {
    const __m128i low = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    for (std::int64_t j = 0; j < padded; j += kB) {
        const __m128i wb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j / 2));
        // (v ^ 8) - 8 sign-extends a 4-bit two's complement value.
        const __m128i lo = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(wb, low), eight), eight);
        const __m128i hi = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(_mm_srli_epi16(wb, 4), low), eight), eight);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), _mm_unpacklo_epi8(lo, hi));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j + 16), _mm_unpackhi_epi8(lo, hi));
    }
}

float dot_i8_avx2(const std::int8_t* w, const std::int8_t* x, const Blocks& k) {
    return one_row<rows_i8_avx2<1>, std::int8_t>(w, x, k);
}
float dot_q4_avx2(const std::uint8_t* w, const std::int8_t* x, const Blocks& k) {
    return one_row<rows_q4_avx2<1>, std::uint8_t>(w, x, k);
}

constexpr ManyFn kI8ManyAvx2[kRowsPerLoad] = {many_avx2<rows_i8_avx2<1>, 1>, many_avx2<rows_i8_avx2<2>, 2>,
                                              many_avx2<rows_i8_avx2<3>, 3>, many_avx2<rows_i8_avx2<4>, 4>};
constexpr ManyFn kI8RowScaleManyAvx2[kRowsPerLoad] = {
    many_avx2<rows_i8_avx2<1, true>, 1>, many_avx2<rows_i8_avx2<2, true>, 2>, many_avx2<rows_i8_avx2<3, true>, 3>,
    many_avx2<rows_i8_avx2<4, true>, 4>};
constexpr ManyFn kQ4ManyAvx2[kRowsPerLoad] = {many_avx2<rows_q4_avx2<1>, 1>, each_row<rows_q4_avx2<2>, 2>,
                                              each_row<rows_q4_avx2<3>, 3>, each_row<rows_q4_avx2<4>, 4>};

// The same quantizer on AVX2 (the AVX2 kernels' activations, and AVX-512 without VNNI):
// the values quant::quantize_activations gives bit for bit, by the steps quantize_vnni takes.
INKLING_AVX2 void quantize_avx2(const float* x, std::int64_t rows, std::int64_t cols, quant::QuantizedActivations& out,
                                std::int8_t* q4) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f), limit = _mm256_set1_ps(127.0f);
    const __m256 neg_limit = _mm256_set1_ps(-127.0f);
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    // packs leave 4-byte groups in the order (0, 4, 1, 5, 2, 6, 3, 7) of the block's eight
    const __m256i unpack = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    // Within each 16-byte lane: its even bytes, then its odd ones.
    const __m256i even_odd = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,  //
                                              0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t b = 0; b < out.blocks; ++b) {
            const std::int64_t begin = b * kB, n = std::min(cols, begin + kB) - begin;
            const float* src = x + r * cols + begin;
            const std::size_t at = static_cast<std::size_t>(r * out.padded + begin);
            __m256 v[4];
            for (int i = 0; i < 4; ++i) {
                const std::int64_t left = std::clamp<std::int64_t>(n - 8 * i, 0, 8);
                if (left == 8) {
                    v[i] = _mm256_loadu_ps(src + 8 * i);
                } else {
                    // Lanes past the row's end read as 0 (never loaded).
                    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lane);
                    v[i] = left > 0 ? _mm256_maskload_ps(src + 8 * i, mask) : _mm256_setzero_ps();
                }
            }
            // max(|v|, m) keeps m where |v| is NaN (maxps returns its second operand then), as
            // std::max(m, |v|) does.
            __m256 mx = _mm256_setzero_ps();
            for (int i = 0; i < 4; ++i) mx = _mm256_max_ps(_mm256_and_ps(v[i], magnitude), mx);
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            const float scale = _mm_cvtss_f32(m4) / 127.0f;
            const std::size_t sb = static_cast<std::size_t>(r * out.blocks + b);
            out.scales[sb] = scale;
            if (scale == 0.0f) {
                out.sums[sb] = 0;  // q stays 0 (cleared), q4 likewise
                continue;
            }
            const __m256 sv = _mm256_set1_ps(scale);
            __m256i q[4];
            for (int i = 0; i < 4; ++i) {
                const __m256 d = _mm256_div_ps(v[i], sv);
                __m256 t = _mm256_round_ps(d, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
                // Ties (and beyond) away from zero: t ± 1 where |d − t| ≥ 0.5 (d − t is exact).
                const __m256 away = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(d, t), magnitude), half, _CMP_GE_OQ);
                const __m256 step = _mm256_or_ps(_mm256_and_ps(d, sign), one);
                t = _mm256_add_ps(t, _mm256_and_ps(away, step));
                t = _mm256_min_ps(_mm256_max_ps(t, neg_limit), limit);  // NaN → -127
                q[i] = _mm256_cvtps_epi32(t);
            }
            const __m256i s01 = _mm256_add_epi32(q[0], q[1]), s23 = _mm256_add_epi32(q[2], q[3]);
            const __m256i s8 = _mm256_add_epi32(s01, s23);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
            out.sums[sb] = _mm_cvtsi128_si32(s4);
            const __m256i bytes = _mm256_permutevar8x32_epi32(
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])), unpack);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + at), bytes);
            if (q4) {
                // q4 order: the block's even values, then its odd ones.
                const __m256i split = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(bytes, even_odd), 0xd8);
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(q4 + at), split);
            }
        }
}

}  // namespace inkling::cpu::x86
