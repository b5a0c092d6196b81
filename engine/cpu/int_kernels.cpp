#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/int_kernels.h"

#include "engine/cpu/int_blocks.h"
#if defined(__x86_64__)
#include "engine/cpu/simd.h"
#include "engine/model/lane_order.h"
#elif defined(__aarch64__)
#include "engine/cpu/arm64/int_kernels.h"
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

namespace inkling::cpu {
namespace {

using model::DType;
using model::Matrix;
constexpr std::int64_t kB = quant::kBlock;
// Weights are read once, front to back; prefetching this far ahead keeps more of the
// stream in flight than the hardware prefetcher does alone (decode at n = 1 is bound by it).
constexpr std::int64_t kPrefetch = 2048;
// The AVX-512 VNNI decode streams (int8, and int4 in the x4 order: one weight row at a
// time) prefetch into L2, not L1: L2 tracks more misses than L1's fill buffers, so more of
// the stream is in flight. `inkling bench --kernels`, 2 threads, n = 1 against the read loop,
// binaries alternating: int8 T0 at 2 KB against T1 at 4 KB, AMD Zen 4 0.61-0.71 against
// 0.82-0.96, the Intel Xeon of the GPU machine 0.70-0.73 against 0.78-0.82 (at 16 threads
// within that machine's noise); T1 at 2 KB against 4 KB on Zen 4, int8 in the read loop's fast
// minutes (53-63 GB/s) 0.89-0.93 against 0.65-0.71, in its slow ones (32-37) 0.79-0.99 against
// 0.85-0.93; 1 KB reads like 2, 3 and 8 KB like 4. int4 (x4 kernel) T1 at 2 KB against T0 at
// 2 KB: fast minutes 0.80-0.84 against 0.72, slow 0.89-1.01 against 0.92-0.94. The int4 pair
// kernels (several activation rows) read alike at every distance and keep T0 at kPrefetch.
constexpr std::int64_t kPrefetchVnni = 2048;


using Blocks = IntBlocks;

// ---- generic: the reference every SIMD path reproduces bit for bit ---------------------
float finish16(float* acc) {
    for (int h = 8; h > 0; h /= 2)
        for (int i = 0; i < h; ++i) acc[i] = acc[i] + acc[i + h];
    return acc[0];
}

int q4_at(const std::uint8_t* w, std::int64_t i) {
    const int v = (i % 2) ? w[i / 2] >> 4 : w[i / 2] & 0xf;
    return v >= 8 ? v - 16 : v;
}

float dot_i8_scalar(const std::int8_t* w, const std::int8_t* x, const Blocks& k) {
    float acc[16] = {};
    for (std::int64_t b = 0; b < k.n; ++b) {
        std::int32_t isum = 0;
        for (std::int64_t i = b * kB; i < (b + 1) * kB; ++i) isum += std::int32_t{w[i]} * x[i];
        acc[b % 16] = std::fma(k.sw[b] * k.sx[b], static_cast<float>(isum), acc[b % 16]);
    }
    return finish16(acc);
}

// `x` in natural order.
float dot_q4_scalar(const std::uint8_t* w, const std::int8_t* x, const Blocks& k) {
    float acc[16] = {};
    for (std::int64_t b = 0; b < k.n; ++b) {
        std::int32_t isum = 0;
        for (std::int64_t i = b * kB; i < (b + 1) * kB; ++i) isum += q4_at(w, i) * x[i];
        acc[b % 16] = std::fma(k.sw[b] * k.sx[b], static_cast<float>(isum), acc[b % 16]);
    }
    return finish16(acc);
}

// A packed int4 row (`padded` values) as int8 in natural order.
void unpack_q4_scalar(const std::uint8_t* w, std::int64_t padded, std::int8_t* out) {
    for (std::int64_t i = 0; i < padded; ++i) out[i] = static_cast<std::int8_t>(q4_at(w, i));
}

// The multi-row kernels (AVX-512 VNNI's): one weight row against up to kRowsPerLoad
// activation rows. Activation rows a weight row meets at once (the p[R][8] sums of R = 4 fill
// 32 zmm only briefly). Two weight rows against one activation row (two streams in flight at
// decode) measured no faster for int8 and 20–30 % slower for int4, so decode is R = 1.
constexpr int kRowsPerLoad = 4;
// Weight rows lanes_vnni takes at once (a zmm of int32 lanes).
constexpr std::int64_t kLanes = 16;
using RowsFn = void (*)(const std::uint8_t*, const std::int8_t* const*, const Blocks*, float*);
// Consecutive weight rows (the stride in bytes, their count) against R activation rows (R the
// table slot + 1), the weight rows' scales one pointer each (Blocks::sw ignored): the output
// of weight row i and activation row r at y[r · y_stride + i].
using ManyFn = void (*)(const std::uint8_t*, std::int64_t, std::int64_t, const std::int8_t* const*, const Blocks*,
                        const float* const*, float*, std::int64_t);

// A ManyFn's loop over the kernel `Row` (a RowsFn for R rows), for the per-ISA entries below
// to take inline: on short rows (1,024 columns: two steps of 16 blocks) a call a row, its
// setup and its final sums' chains weighed as much as a step. One row writes in place.
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

#if defined(__x86_64__)
// The one-row entry (IntKernels::dot_*) of a kernel set whose multi-row kernel takes R = 1:
// that kernel on one row. W is the weights' element type (int8, or packed int4 bytes).
template <RowsFn One, class W>
float one_row(const W* w, const std::int8_t* x, const Blocks& k) {
    float out;
    One(reinterpret_cast<const std::uint8_t*>(w), &x, &k, &out);
    return out;
}

// ---- AVX2 ------------------------------------------------------------------------------
#define INKLING_AVX2 __attribute__((target("avx2,fma")))
// Entry points take their helpers inline (flatten): see INKLING_VNNI_ENTRY.
#define INKLING_AVX2_ENTRY INKLING_AVX2 __attribute__((flatten, aligned(64)))

// The tree of the pattern from h = 8 on: `h8` holds acc[i] + acc[i + 8], i < 8.
INKLING_AVX2 inline float finish8_avx2(__m256 h8) {
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

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
constexpr ManyFn kI8ManyAvx2[] = {many_avx2<rows_i8_avx2<1>, 1>, many_avx2<rows_i8_avx2<2>, 2>,
                                  many_avx2<rows_i8_avx2<3>, 3>, many_avx2<rows_i8_avx2<4>, 4>};
constexpr ManyFn kI8RowScaleManyAvx2[] = {many_avx2<rows_i8_avx2<1, true>, 1>, many_avx2<rows_i8_avx2<2, true>, 2>,
                                          many_avx2<rows_i8_avx2<3, true>, 3>, many_avx2<rows_i8_avx2<4, true>, 4>};
constexpr ManyFn kQ4ManyAvx2[] = {many_avx2<rows_q4_avx2<1>, 1>, each_row<rows_q4_avx2<2>, 2>,
                                  each_row<rows_q4_avx2<3>, 3>, each_row<rows_q4_avx2<4>, 4>};

// ---- AVX-512 VNNI ----------------------------------------------------------------------
#define INKLING_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))
// The kernels' entry points take every helper inline (flatten). Out of line, fold_tail_vnni
// took the accumulators' address, so each row stored them to the stack after its last block
// and read them back for its final sum (a 512-bit store forwarded to a 256-bit load). One
// core over weights in L2 (Zen 4, a harness calling int_product_rows at n = 1), with
// many_vnni's one call a block of rows: int8 1,024 columns 36 -> 50 GB/s, 4,096 columns
// 48-50 -> 58-59; int4 1,024 columns 18-26 -> 36, 4,096 columns 34 -> 39. (always_inline on
// the helpers instead: MinGW's GCC then refuses the file — a 512-bit vector ABI warning.)
// Each entry starts on a 64-byte line: where the linker happened to put one decided its speed
// (AVX2 int8, one row, 1,024 columns: 28 GB/s at an address ≡ 32 mod 64, 33 at one ≡ 0 —
// the same instructions).
#define INKLING_VNNI_ENTRY INKLING_VNNI __attribute__((flatten, aligned(64)))

// Eight vectors, each the 16 int32 partial sums of two blocks (lanes 0-7 the first, 8-15
// the second) → one vector of the sixteen block totals, in block order.
INKLING_VNNI inline __m512i pairs(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
INKLING_VNNI inline __m512i reduce16_vnni(const __m512i* p) {
    const __m512i t0 = pairs(p[0], p[1]), t1 = pairs(p[2], p[3]), t2 = pairs(p[4], p[5]), t3 = pairs(p[6], p[7]);
    // Each 128-bit lane j of w0 holds [p0, p1, p2, p3] summed over that lane; w1 for p4..p7.
    const __m512i w0 = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    const __m512i w1 = _mm512_add_epi32(_mm512_unpacklo_epi64(t2, t3), _mm512_unpackhi_epi64(t2, t3));
    // Lanes 0+1 are a vector's first block, 2+3 its second: blocks 0,2,4,6 | 1,3,5,7 | 8,… | 9,…
    const __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), s);
}

// The weights of a pair of blocks as unsigned bytes for dpbusd, and the offset (a power of
// two) that makes them so, taken back afterwards as offset·Σx.
// int8: w ^ 0x80 = w + 128. `single`: a lone last block (the upper 32 bytes read as 0,
// which becomes 128 — against activations read as 0 there). `RowScale`: the row has one
// scale (the converter's int8), read once as k.sw[0] and broadcast — the same s_w·s_x
// products as a per-block array of equal scales, without expanding one for every row (an
// array of 128 floats a 4 KB row, which the stream then had to share L1 with).
template <bool RowScale>
struct I8Vnni {
    const std::int8_t* w;
    static constexpr int kShift = 7;
    static constexpr bool kRowScale = RowScale;
    INKLING_VNNI __m512i pair(std::int64_t b) const {
        _mm_prefetch(reinterpret_cast<const char*>(w + b * kB) + kPrefetchVnni, _MM_HINT_T1);
        return _mm512_xor_si512(_mm512_loadu_si512(w + b * kB), _mm512_set1_epi8(-128));
    }
    INKLING_VNNI __m512i single(std::int64_t b) const {
        return _mm512_xor_si512(_mm512_maskz_loadu_epi8(0xffffffffull, w + b * kB), _mm512_set1_epi8(-128));
    }
};

// int4 (32 bytes a pair): 128-bit lanes [block b low nibbles, its high nibbles, block b+1
// low, high] for activations in the q4 order; nibble ^ 8 = q + 8 as in Q4Avx2Rows. Expanded
// once per pair whatever the number of activation rows it meets.
struct Q4Vnni {
    const std::uint8_t* w;
    static constexpr int kShift = 3;
    static constexpr bool kRowScale = false;
    // Three operations a pair: each block's 16 bytes into two 128-bit lanes (one qword
    // permute), the second of each shifted down a nibble, then (z & 0x0f) ^ 8 in one
    // ternary-logic op (0x6a = (A & B) ^ C). Measured while this expansion fed the one-row
    // kernel, which it bounded on Zen 4 (`inkling bench --kernels --threads 1`, binaries
    // alternating): the obvious five operations (xor, shift, insert, lane shuffle, and) read
    // 14.3-19.4 GB/s a core, these three 17.5-24.1.
    INKLING_VNNI static __m512i expand(__m256i wb) {
        const __m512i lanes = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
        __m512i z = _mm512_permutexvar_epi64(lanes, _mm512_castsi256_si512(wb));
        z = _mm512_mask_srli_epi16(z, 0xff00ff00u, z, 4);
        return _mm512_ternarylogic_epi32(z, _mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x08), 0x6a);
    }
    INKLING_VNNI __m512i pair(std::int64_t b) const {
        if (b % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(w + b * kB / 2) + kPrefetch, _MM_HINT_T0);
        return expand(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * kB / 2)));
    }
    INKLING_VNNI __m512i single(std::int64_t b) const { return expand(_mm256_maskz_loadu_epi8(0xffff, w + b * kB / 2)); }
};

// The weight scales of blocks [b, b + 16): one broadcast row scale, or the row's array.
template <class K>
INKLING_VNNI inline __m512 weight_scales(const Blocks& k, std::int64_t b, __mmask16 m = 0xffff) {
    if constexpr (K::kRowScale) return _mm512_set1_ps(k.sw[0]);
    return _mm512_maskz_loadu_ps(m, k.sw + b);
}

// The float part of 16 blocks (the pattern of int_kernels.h) from their integer totals (the
// weights' offset still in them, taken back here as offset·Σx).
template <class K>
INKLING_VNNI inline __m512 fold_sums16(__m512i sums, const Blocks& k, std::int64_t b, __m512 acc) {
    const __m512i xs = _mm512_slli_epi32(_mm512_loadu_si512(k.xsums + b), K::kShift);
    const __m512i isum = _mm512_sub_epi32(sums, xs);
    const __m512 d = _mm512_mul_ps(weight_scales<K>(k, b), _mm512_loadu_ps(k.sx + b));
    return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc);
}

// The same from the partial sums of their 8 pairs.
template <class K>
INKLING_VNNI inline __m512 fold16(const __m512i* p, const Blocks& k, std::int64_t b, __m512 acc) {
    return fold_sums16<K>(reduce16_vnni(p), k, b, acc);
}

// The last n - b (< 16) blocks of dot_vnni_rows, lanes past them left as they are.
template <class K, int R>
INKLING_VNNI inline void fold_tail_vnni(const K& kern, const std::int8_t* const* x, const Blocks* k, std::int64_t b,
                                        __m512 (&acc)[R]) {
    const std::int64_t n = k[0].n;
    __m512i p[R][8];
    const std::int64_t left = n - b;
    for (int j = 0; j < 8; ++j) {
        const std::int64_t at = b + 2 * j;
        if (2 * j >= left) {
            for (int r = 0; r < R; ++r) p[r][j] = _mm512_setzero_si512();
            continue;
        }
        const bool pair = 2 * j + 1 < left;
        const __m512i wv = pair ? kern.pair(at) : kern.single(at);
        for (int r = 0; r < R; ++r) {
            const __m512i xv = pair ? _mm512_loadu_si512(x[r] + at * kB)
                                    : _mm512_maskz_loadu_epi8(0xffffffffull, x[r] + at * kB);
            p[r][j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, xv);
        }
    }
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1);
    for (int r = 0; r < R; ++r) {
        const __m512i xs = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(m, k[r].xsums + b), K::kShift);
        const __m512i isum = _mm512_sub_epi32(reduce16_vnni(p[r]), xs);
        const __m512 d = _mm512_mul_ps(weight_scales<K>(k[r], b, m), _mm512_maskz_loadu_ps(m, k[r].sx + b));
        acc[r] = _mm512_mask3_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc[r], m);
    }
}

// Each row's 16 accumulators summed in the pattern's order (int_kernels.h) into out[r].
template <int R>
INKLING_VNNI inline void finish_rows(const __m512 (&acc)[R], float* out) {
    for (int r = 0; r < R; ++r)
        out[r] = finish8_avx2(_mm256_add_ps(_mm512_castps512_ps256(acc[r]), _mm512_extractf32x8_ps(acc[r], 1)));
}

// One weight row against R activation rows: each pair of weight blocks is loaded (and, for
// int4, expanded) once and meets every row; each row's sum is formed exactly as for R = 1.
template <class K, int R>
INKLING_VNNI inline void dot_vnni_rows(const K& kern, const std::int8_t* const* x, const Blocks* k, float* out) {
    const std::int64_t n = k[0].n;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    __m512i p[R][8];
    std::int64_t b = 0;
    for (; b + 16 <= n; b += 16) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            const __m512i wv = kern.pair(b + 2 * j);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r)
                p[r][j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, _mm512_loadu_si512(x[r] + (b + 2 * j) * kB));
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r] = fold16<K>(p[r], k[r], b, acc[r]);
    }
    if (b < n) fold_tail_vnni<K, R>(kern, x, k, b, acc);
    finish_rows<R>(acc, out);
}

// int8 weights in the lane order (engine/model/lane_order.h) against activations in the same
// order (IntActivations::lanes): in a full group of 16 blocks, lane j of every vector is block
// j, so eight dpbusd (in two chains, for their latency) leave the 16 block sums in block order —
// fold_sums16's input with no reduction: per 512 bytes ~30 operations where the column order
// takes ~53. The last blocks (fewer than 16) are in column order in both, for fold_tail_vnni.
template <int R, bool RowScale = false>
INKLING_VNNI_ENTRY void rows_i8_lanes_vnni(const std::uint8_t* w, const std::int8_t* const* x, const Blocks* k,
                                           float* out) {
    using K = I8Vnni<RowScale>;
    const K kern{reinterpret_cast<const std::int8_t*>(w)};
    const std::int64_t n = k[0].n;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    std::int64_t b = 0;
    for (; b + 16 <= n; b += 16) {
        __m512i s[R][2];
#pragma GCC unroll 8
        for (int v = 0; v < 8; ++v) {
            const std::int64_t at = b * kB + v * 64;
            _mm_prefetch(reinterpret_cast<const char*>(kern.w + at) + kPrefetchVnni, _MM_HINT_T1);
            const __m512i wv = _mm512_xor_si512(_mm512_loadu_si512(kern.w + at), _mm512_set1_epi8(-128));
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r)
                s[r][v % 2] = _mm512_dpbusd_epi32(v < 2 ? _mm512_setzero_si512() : s[r][v % 2], wv,
                                                  _mm512_loadu_si512(x[r] + at));
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r] = fold_sums16<K>(_mm512_add_epi32(s[r][0], s[r][1]), k[r], b, acc[r]);
    }
    if (b < n) fold_tail_vnni<K, R>(kern, x, k, b, acc);
    finish_rows<R>(acc, out);
}

template <int R, bool RowScale = false>
INKLING_VNNI_ENTRY void rows_i8_vnni(const std::uint8_t* w, const std::int8_t* const* x, const Blocks* k, float* out) {
    dot_vnni_rows<I8Vnni<RowScale>, R>(I8Vnni<RowScale>{reinterpret_cast<const std::int8_t*>(w)}, x, k, out);
}
template <int R>
INKLING_VNNI_ENTRY void rows_q4_vnni(const std::uint8_t* w, const std::int8_t* const* x, const Blocks* k, float* out) {
    dot_vnni_rows<Q4Vnni, R>(Q4Vnni{w}, x, k, out);
}

// int4 against one to four activation rows (decode, batched decode), blocks in groups of
// four: one 64-byte load is four blocks' packed bytes, its low nibbles one dpbusd operand and
// its high nibbles another,
// against activations in the x4 order (IntActivations::q4x4: per four blocks their even
// elements, then their odd ones). Each 128-bit lane then sums one block, so 16 blocks come
// to four vectors and a two-level reduction, with no cross-lane shuffle in the expansion:
// ~40 operations a 16 blocks against the pair kernel's ~68 (its permute, shift and ternlog
// a pair, then the eight-vector tree). Integer block sums are exact in any order, and the
// float part is fold16's: the bits of dot_vnni_rows<Q4Vnni, R>, whose tail this reuses for
// the last blocks (fewer than 16, left in the q4 order there). Each expansion meets all R
// rows. On Zen 4, one row, one core over weights in cache (`inkling bench --kernels
// --kernel-mb 1 --threads 1`): 15-21 -> 31-34 GB/s, and from memory on 2 threads it is then
// the stream that bounds it; 4 rows from memory on 2 threads: 251-259 -> 337-364 GFLOP/s.
INKLING_VNNI inline __m512i unsigned_nibbles(__m512i z) {
    return _mm512_ternarylogic_epi32(z, _mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x08), 0x6a);  // (z & 15) ^ 8
}
// The 64 bytes of int4 at wg as two dpbusd operands, their low nibbles and their high ones
// (each q + 8, unsigned), the line kPrefetchVnni ahead asked for.
INKLING_VNNI inline void nibbles_at(const std::uint8_t* wg, __m512i& lo, __m512i& hi) {
    _mm_prefetch(reinterpret_cast<const char*>(wg) + kPrefetchVnni, _MM_HINT_T1);
    const __m512i z = _mm512_loadu_si512(wg);
    lo = unsigned_nibbles(z);
    hi = unsigned_nibbles(_mm512_srli_epi16(z, 4));
}
template <int R>
INKLING_VNNI_ENTRY void rows_q4_x4_vnni(const std::uint8_t* w, const std::int8_t* const* x4, const Blocks* k,
                                        float* out) {
    const std::int64_t n = k[0].n;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    std::int64_t b = 0;
    for (; b + 16 <= n; b += 16) {
        __m512i q[R][4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
            __m512i lo, hi;
            nibbles_at(w + (b + 4 * g) * kB / 2, lo, hi);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const std::int8_t* xg = x4[r] + (b + 4 * g) * kB;
                q[r][g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xg)),
                                              hi, _mm512_loadu_si512(xg + 64));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            // Lane 4c + g of s: block b + 4g + c's total.
            const __m512i t0 = pairs(q[r][0], q[r][1]), t1 = pairs(q[r][2], q[r][3]);
            const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
            const __m512i sums =
                _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s);
            acc[r] = fold_sums16<Q4Vnni>(sums, k[r], b, acc[r]);
        }
    }
    if (b < n) fold_tail_vnni<Q4Vnni, R>(Q4Vnni{w}, x4, k, b, acc);
    finish_rows<R>(acc, out);
}

// int4 weights in the lane order (engine/model/lane_order.h: a full group of 16 blocks is four
// vectors, lane j of vector k block j's packed word k, elements 8k..8k+7) against the q4 order's
// values in the lane order (IntActivations::q4_lanes: vector k lane j block j's elements 8k,
// 8k+2, 8k+4, 8k+6 — the low nibbles' — and vector 4 + k the high nibbles' 8k+1, …, 8k+7).
// Each load expands to two dpbusd operands with no shuffle, and the 16 block sums come out in
// block order: ~35 operations a 16 blocks against the x4 order's ~45. The last blocks (fewer
// than 16) are in column order and the q4 order, for fold_tail_vnni.
template <int R>
INKLING_VNNI_ENTRY void rows_q4_lanes_vnni(const std::uint8_t* w, const std::int8_t* const* x, const Blocks* k,
                                           float* out) {
    const std::int64_t n = k[0].n;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    std::int64_t b = 0;
    for (; b + 16 <= n; b += 16) {
        __m512i s[R][2];
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
            __m512i lo, hi;
            nibbles_at(w + b * kB / 2 + v * 64, lo, hi);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const std::int8_t* xg = x[r] + b * kB + v * 64;
                s[r][0] = _mm512_dpbusd_epi32(v == 0 ? _mm512_setzero_si512() : s[r][0], lo, _mm512_loadu_si512(xg));
                s[r][1] = _mm512_dpbusd_epi32(v == 0 ? _mm512_setzero_si512() : s[r][1], hi, _mm512_loadu_si512(xg + 256));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
            acc[r] = fold_sums16<Q4Vnni>(_mm512_add_epi32(s[r][0], s[r][1]), k[r], b, acc[r]);
    }
    if (b < n) fold_tail_vnni<Q4Vnni, R>(Q4Vnni{w}, x, k, b, acc);
    finish_rows<R>(acc, out);
}

// (See many_avx2.)
template <RowsFn Row, int R, class... A>
INKLING_VNNI_ENTRY void many_vnni(A... a) {
    each_row<Row, R>(a...);
}

constexpr ManyFn kI8Many[] = {many_vnni<rows_i8_vnni<1>, 1>, many_vnni<rows_i8_vnni<2>, 2>,
                              many_vnni<rows_i8_vnni<3>, 3>, many_vnni<rows_i8_vnni<4>, 4>};
constexpr ManyFn kI8RowScaleMany[] = {many_vnni<rows_i8_vnni<1, true>, 1>, many_vnni<rows_i8_vnni<2, true>, 2>,
                                      many_vnni<rows_i8_vnni<3, true>, 3>, many_vnni<rows_i8_vnni<4, true>, 4>};
constexpr ManyFn kI8LanesMany[] = {many_vnni<rows_i8_lanes_vnni<1>, 1>, many_vnni<rows_i8_lanes_vnni<2>, 2>,
                                   many_vnni<rows_i8_lanes_vnni<3>, 3>, many_vnni<rows_i8_lanes_vnni<4>, 4>};
constexpr ManyFn kI8LanesRowScaleMany[] = {
    many_vnni<rows_i8_lanes_vnni<1, true>, 1>, many_vnni<rows_i8_lanes_vnni<2, true>, 2>,
    many_vnni<rows_i8_lanes_vnni<3, true>, 3>, many_vnni<rows_i8_lanes_vnni<4, true>, 4>};
constexpr ManyFn kQ4LanesMany[] = {many_vnni<rows_q4_lanes_vnni<1>, 1>, many_vnni<rows_q4_lanes_vnni<2>, 2>,
                                   each_row<rows_q4_lanes_vnni<3>, 3>, each_row<rows_q4_lanes_vnni<4>, 4>};
constexpr ManyFn kQ4Many[] = {many_vnni<rows_q4_vnni<1>, 1>, many_vnni<rows_q4_vnni<2>, 2>,
                              many_vnni<rows_q4_vnni<3>, 3>, many_vnni<rows_q4_vnni<4>, 4>};
constexpr ManyFn kQ4X4Many[] = {many_vnni<rows_q4_x4_vnni<1>, 1>, many_vnni<rows_q4_x4_vnni<2>, 2>,
                                each_row<rows_q4_x4_vnni<3>, 3>, each_row<rows_q4_x4_vnni<4>, 4>};

// Sixteen weight rows against many activation rows, one weight row a lane (prefill and
// batched decode). Each block's weights of the 16 rows are gathered once into a tile —
// vector k holds dword k of the block of every row, as unsigned bytes for dpbusd (int4
// nibbles expanded: dwords 0-3 the low nibbles, 4-7 the high ones, against the q4 order's
// dwords) — and every activation row then forms a block's 16 exact sums with 8 dpbusd and no
// horizontal reduction; the float part is int_kernels.h's pattern with the 16 accumulators
// of a row as 16 vectors (acc[b % 16], lanes = weight rows), so each output has the bits
// dot_vnni_rows gives it.
constexpr int kLaneRows = 8;  // activation rows a tile vector meets per load

INKLING_VNNI void lanes_vnni(bool q4, bool lane_packed, const std::uint8_t* w, std::int64_t row_bytes,
                             const float* const* sw, const quant::QuantizedActivations& a, const std::int8_t* xq,
                             std::int64_t y_stride, float* y) {
    const std::int64_t nb = a.blocks, block_bytes = q4 ? kB / 2 : kB;
    std::vector<std::int32_t>& tile = thread_scratch<std::int32_t, struct lanes_tile_scratch>();
    std::vector<float>& swt = thread_scratch<float, struct lanes_sw_scratch>();
    tile.resize(static_cast<std::size_t>(nb * 8 * kLanes));
    swt.resize(static_cast<std::size_t>(nb * kLanes));
    const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(static_cast<int>(row_bytes)));
    for (std::int64_t b = 0; b < nb; ++b) {
        std::int32_t* t = tile.data() + b * 8 * kLanes;
        // Word g of block b: 4·g bytes into the block in column order; in the lane order (a
        // full group's blocks) 64·g bytes into the group, at the block's lane.
        const bool grouped = lane_packed && b < nb / 16 * 16;
        const std::uint8_t* word0 = grouped ? w + (b / 16) * 16 * block_bytes + (b % 16) * 4 : w + b * block_bytes;
        const std::int64_t step = grouped ? 64 : 4;
        if (q4) {
            const __m512i nib = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8(static_cast<char>(0x88));
            for (int g = 0; g < 4; ++g) {
                const __m512i v = _mm512_xor_si512(_mm512_i32gather_epi32(at, word0 + step * g, 1), flip);
                _mm512_storeu_si512(t + g * kLanes, _mm512_and_si512(v, nib));
                _mm512_storeu_si512(t + (4 + g) * kLanes, _mm512_and_si512(_mm512_srli_epi32(v, 4), nib));
            }
        } else {
            for (int g = 0; g < 8; ++g)
                _mm512_storeu_si512(t + g * kLanes, _mm512_xor_si512(_mm512_i32gather_epi32(at, word0 + step * g, 1),
                                                                     _mm512_set1_epi8(-128)));
        }
        for (std::int64_t l = 0; l < kLanes; ++l) swt[static_cast<std::size_t>(b * kLanes + l)] = sw[l][b];
    }
    const int shift = q4 ? Q4Vnni::kShift : I8Vnni<false>::kShift;
    for (std::int64_t s0 = 0; s0 < a.rows; s0 += kLaneRows) {
        const int rows = static_cast<int>(std::min<std::int64_t>(kLaneRows, a.rows - s0));
        __m512 acc[kLaneRows][16];
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < 16; ++j) acc[i][j] = _mm512_setzero_ps();
        for (std::int64_t b = 0; b < nb; ++b) {
            const std::int32_t* t = tile.data() + b * 8 * kLanes;
            __m512i wv[8];
            for (int k = 0; k < 8; ++k) wv[k] = _mm512_loadu_si512(t + k * kLanes);
            const __m512 swv = _mm512_loadu_ps(swt.data() + b * kLanes);
            for (int i = 0; i < rows; ++i) {
                const std::int64_t s = s0 + i;
                const auto* xd = reinterpret_cast<const std::int32_t*>(xq + s * a.padded + b * kB);
                __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[0], _mm512_set1_epi32(xd[0]));
                __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[4], _mm512_set1_epi32(xd[4]));
                p0 = _mm512_dpbusd_epi32(p0, wv[1], _mm512_set1_epi32(xd[1]));
                p1 = _mm512_dpbusd_epi32(p1, wv[5], _mm512_set1_epi32(xd[5]));
                p0 = _mm512_dpbusd_epi32(p0, wv[2], _mm512_set1_epi32(xd[2]));
                p1 = _mm512_dpbusd_epi32(p1, wv[6], _mm512_set1_epi32(xd[6]));
                p0 = _mm512_dpbusd_epi32(p0, wv[3], _mm512_set1_epi32(xd[3]));
                p1 = _mm512_dpbusd_epi32(p1, wv[7], _mm512_set1_epi32(xd[7]));
                const __m512i isum =
                    _mm512_sub_epi32(_mm512_add_epi32(p0, p1), _mm512_set1_epi32(a.sums[static_cast<std::size_t>(s * nb + b)] << shift));
                const __m512 d = _mm512_mul_ps(swv, _mm512_set1_ps(a.scales[static_cast<std::size_t>(s * nb + b)]));
                __m512& c = acc[i][b % 16];
                c = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), c);
            }
        }
        for (int i = 0; i < rows; ++i) {
            for (int h = 8; h > 0; h /= 2)
                for (int j = 0; j < h; ++j) acc[i][j] = _mm512_add_ps(acc[i][j], acc[i][j + h]);
            _mm512_storeu_ps(y + (s0 + i) * y_stride, acc[i][0]);
        }
    }
}

// Activation quantization, vectorized: the same values as quant::quantize_activations bit
// for bit (s = max|x| / 127 in f32, q = round(x / s) by IEEE division, ties away from zero,
// NaN to -127 as lround's LONG_MIN clamps there), and the q4 order in the same pass.
INKLING_VNNI void quantize_vnni(const float* x, std::int64_t rows, std::int64_t cols, quant::QuantizedActivations& out,
                                std::int8_t* q4) {
    alignas(64) static constexpr std::int32_t kEven[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
    alignas(64) static constexpr std::int32_t kOdd[16] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
    const __m512i even = _mm512_load_si512(kEven), odd = _mm512_load_si512(kOdd);
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), limit = _mm512_set1_ps(127.0f);
    const __m512 neg_limit = _mm512_set1_ps(-127.0f);
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t b = 0; b < out.blocks; ++b) {
            const std::int64_t begin = b * kB, n = std::min(cols, begin + kB) - begin;
            const float* src = x + r * cols + begin;
            const std::size_t at = static_cast<std::size_t>(r * out.padded + begin);
            const __mmask16 m0 = n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
            const __mmask16 m1 = n >= 32  ? __mmask16(0xffff)
                                 : n > 16 ? static_cast<__mmask16>((1u << (n - 16)) - 1)
                                          : __mmask16(0);
            const __m512 v0 = _mm512_maskz_loadu_ps(m0, src), v1 = _mm512_maskz_loadu_ps(m1, src + 16);
            // max(|v|, m) keeps m where |v| is NaN, as std::max(m, |v|) does.
            __m512 mx = _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps());
            mx = _mm512_max_ps(_mm512_abs_ps(v1), mx);
            const float scale = _mm512_reduce_max_ps(mx) / 127.0f;
            const std::size_t sb = static_cast<std::size_t>(r * out.blocks + b);
            out.scales[sb] = scale;
            if (scale == 0.0f) {
                out.sums[sb] = 0;  // q stays 0 (cleared), q4 likewise
                continue;
            }
            const __m512 sv = _mm512_set1_ps(scale);
            auto quantize = [&](__m512 v) INKLING_VNNI {
                const __m512 q = _mm512_div_ps(v, sv);
                __m512 t = _mm512_roundscale_ps(q, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
                const __mmask16 away =
                    _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(q, t)), half, _CMP_GE_OQ);
                const __m512 step = _mm512_castsi512_ps(
                    _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(q), sign), _mm512_castps_si512(one)));
                t = _mm512_mask_add_ps(t, away, t, step);
                t = _mm512_min_ps(_mm512_max_ps(t, neg_limit), limit);  // NaN → -127
                return _mm512_cvtps_epi32(t);
            };
            const __m512i i0 = quantize(v0), i1 = quantize(v1);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out.q.data() + at), _mm512_cvtsepi32_epi8(i0));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out.q.data() + at + 16), _mm512_cvtsepi32_epi8(i1));
            out.sums[sb] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
            if (q4) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(q4 + at),
                                 _mm512_cvtsepi32_epi8(_mm512_permutex2var_epi32(i0, even, i1)));
                _mm_storeu_si128(reinterpret_cast<__m128i*>(q4 + at + 16),
                                 _mm512_cvtsepi32_epi8(_mm512_permutex2var_epi32(i0, odd, i1)));
            }
        }
}

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

#endif  // __x86_64__

// ---- dispatch ----------------------------------------------------------------------------
using TileFn = void (*)(const std::uint8_t* const*, const std::int8_t* const*, const Blocks*, float*);
using LanesFn = void (*)(bool, bool, const std::uint8_t*, std::int64_t, const float* const*,
                         const quant::QuantizedActivations&, const std::int8_t*, std::int64_t, float*);
struct IntKernels {
    float (*dot_i8)(const std::int8_t*, const std::int8_t*, const Blocks&);
    float (*dot_q4)(const std::uint8_t*, const std::int8_t*, const Blocks&);  // x in q4 order if q4_order
    void (*unpack_q4)(const std::uint8_t*, std::int64_t, std::int8_t*);
    bool q4_order;
    // Optional: 2 weight rows × 2 activation rows at once (SMMLA), the four outputs
    // [w0·x0, w0·x1, w1·x0, w1·x1] each as dot_* gives it (blocks in that order too); the
    // rows it leaves (an odd one) go through dot_*.
    TileFn tile_i8;
    TileFn tile_q4;
    // Optional: 16 weight rows a lane against every activation row (lanes_vnni); or null.
    LanesFn lanes;
    // Optional: several activation rows per weight load (1..kRowsPerLoad, the table's slot
    // + 1), over a block of weight rows a call: int8; int8 rows of one scale (passed as
    // Blocks::sw[0]: the same sums as a per-block array of equal scales); int4 with x in the
    // q4 order; int4 with x in the x4 order (rows_q4_x4_vnni). Null where the set has none.
    const ManyFn *many_i8, *many_i8_row_scale, *many_q4, *many_q4_x4;
    // Optional: the same for lane-packed weights (x in the lane order): int8 per-block and
    // one-scale rows, int4 (x the q4 order's values in the lane order); null where the set
    // cannot read the lane order (lane_order_pays).
    const ManyFn *many_i8_lanes, *many_i8_lanes_row_scale, *many_q4_lanes;
    const char* name;
};

IntKernels int_kernels_for(Isa isa) {
#if defined(__x86_64__)
    static const bool vnni = has_avx512_vnni();
    if (isa == Isa::Avx512 && vnni)
        return {one_row<rows_i8_vnni<1>, std::int8_t>,
                one_row<rows_q4_vnni<1>, std::uint8_t>,
                unpack_q4_avx2,
                true,
                nullptr,
                nullptr,
                lanes_vnni,
                kI8Many,
                kI8RowScaleMany,
                kQ4Many,
                kQ4X4Many,
                kI8LanesMany,
                kI8LanesRowScaleMany,
                kQ4LanesMany,
                "avx512-vnni"};
    if (isa == Isa::Avx2 || isa == Isa::Avx512)
        return {one_row<rows_i8_avx2<1>, std::int8_t>,
                one_row<rows_q4_avx2<1>, std::uint8_t>,
                unpack_q4_avx2,
                true,
                nullptr,
                nullptr,
                nullptr,
                kI8ManyAvx2,
                kI8RowScaleManyAvx2,
                kQ4ManyAvx2,
                nullptr,
                nullptr,
                nullptr,
                nullptr,
                "avx2"};
#elif defined(__aarch64__)
    // (engine/cpu/arm64/int_kernels.h; a level this build could not compile is never the
    // active ISA: arm64::best_isa stops below it.)
    if (isa == Isa::I8mm)
        return {arm64::dot_i8_dotprod, arm64::dot_q4_dotprod, unpack_q4_scalar, true, arm64::tile_i8_i8mm,
                arm64::tile_q4_i8mm, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, "smmla+sdot"};
    if (isa == Isa::Dotprod)
        return {arm64::dot_i8_dotprod, arm64::dot_q4_dotprod, unpack_q4_scalar, true, nullptr, nullptr, nullptr,
                nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, "sdot"};
    if (isa == Isa::Neon)
        return {arm64::dot_i8_neon, arm64::dot_q4_neon, unpack_q4_scalar, true, nullptr, nullptr, nullptr, nullptr,
                nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, "neon"};
#endif
    (void)isa;
    return {dot_i8_scalar, dot_q4_scalar, unpack_q4_scalar, false, nullptr, nullptr, nullptr, nullptr, nullptr,
            nullptr, nullptr, nullptr, nullptr, nullptr, "scalar"};
}

// Weight rows a block of the multi-row kernels holds (in L2) while every group of activation
// rows passes over it.
constexpr std::int64_t kWeightBlockBytes = 256 << 10;

// Without a multi-row kernel: from this many activation rows on, an int4 row is widened to
// int8 once and then dotted with every row (the nibble unpacking would otherwise repeat).
constexpr std::int64_t kUnpackFromRows = 3;

// From this many activation rows on, 16 weight rows go through lanes_vnni together: its tile
// of gathered weights pays off over the rows. Against the multi-row kernels (four rows a
// weight load, int4 in the x4 order; 2 threads, 14336 × 4096, Zen 4, two runs each, the
// threshold moved in a scratch build), lanes_vnni at 12 / 16 / 20 / 24 / 32
// / 48 rows: int8 87-94 / 134-154 / 167-188 / 213-215 / 220-246 / 259-298 GFLOP/s against
// 197 / 196-248 / 202-240 / 206-227 / 203-216 / 208-264; int4 184-186 / 209-222 / 224-240 /
// 241-250 / 264-281 / 278-384 against 289-294 / 303-309 / 285-361 / 212-362 / 213-364 /
// 214-372. Inkling-Small's routed experts see ~24 rows each in a 512-token prompt chunk.
constexpr std::int64_t kLanesFromRows = 24;

}  // namespace

bool has_avx512_vnni() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

const char* int_kernel_name(Isa isa) { return int_kernels_for(isa).name; }

bool lane_order_pays(Isa isa) { return int_kernels_for(isa).many_i8_lanes != nullptr; }

namespace {
std::atomic<bool> g_lane_order{true};
}
bool lane_order_active() { return g_lane_order.load() && lane_order_pays(active_isa()); }
void set_lane_order(bool on) { g_lane_order.store(on); }

#if defined(__x86_64__)
namespace {
// Rows in the q4 order → the x4 order rows_q4_x4_vnni reads: each row's full 16 blocks as
// four groups of [the four blocks' even elements, then their odd ones]; the last blocks
// (fewer than 16) stay in the q4 order, for the kernel's tail.
void to_x4_order(const platform::AlignedVector<std::int8_t>& q4, std::int64_t rows, std::int64_t padded,
                 platform::AlignedVector<std::int8_t>& x4) {
    x4.resize(q4.size());
    constexpr std::int64_t kHalf = kB / 2;
    const std::int64_t grouped = padded / kB / 16 * 16;  // blocks a row has in full 16s
    for (std::int64_t s = 0; s < rows; ++s) {
        const std::int8_t* row = q4.data() + s * padded;
        std::int8_t* out = x4.data() + s * padded;
        for (std::int64_t g = 0; g < grouped; g += 4)
            for (std::int64_t c = 0; c < 4; ++c) {
                const std::int8_t* src = row + (g + c) * kB;
                std::copy_n(src, kHalf, out + g * kB + c * kHalf);
                std::copy_n(src + kHalf, kHalf, out + g * kB + 4 * kHalf + c * kHalf);
            }
        std::copy(row + grouped * kB, row + padded, out + grouped * kB);  // the tail, as it is
    }
}
}  // namespace
#endif

void prepare_int_activations(Isa isa, bool q4_order, const float* x, std::int64_t rows, std::int64_t cols,
                             IntActivations& out) {
    const IntKernels k = int_kernels_for(isa);
    out.q4.clear();
    out.q4x4.clear();
    out.lanes.clear();
    out.q4_lanes.clear();
#if defined(__x86_64__)
    // The vectorized quantizers: VNNI's for its kernels, AVX2's for the AVX2 ones (AVX-512
    // without VNNI runs those too). q4 order where the kernels read it.
    const bool vnni = isa == Isa::Avx512 && has_avx512_vnni();
    if (vnni || isa == Isa::Avx2 || isa == Isa::Avx512) {
        quant::QuantizedActivations& a = out.a;
        a.rows = rows;
        a.cols = cols;
        a.padded = quant::padded_cols(cols);
        a.blocks = a.padded / kB;
        a.q.assign(static_cast<std::size_t>(rows * a.padded), 0);
        a.scales.resize(static_cast<std::size_t>(rows * a.blocks));
        a.sums.resize(static_cast<std::size_t>(rows * a.blocks));
        const bool q4 = q4_order && k.q4_order;
        if (q4) out.q4.assign(a.q.size(), 0);
        (vnni ? quantize_vnni : quantize_avx2)(x, rows, cols, a, q4 ? out.q4.data() : nullptr);
        // The x4 order for the rows that reach the multi-row kernels (below lanes_vnni's).
        if (q4 && rows < kLanesFromRows && k.many_q4_x4) to_x4_order(out.q4, rows, a.padded, out.q4x4);
        // The lane order, for lane-packed int8 weights (every row count: past lanes_vnni's 16
        // weight rows at a time, a matrix's last rows go through the multi-row kernels).
        if (k.many_i8_lanes) {
            out.lanes.resize(a.q.size());
            model::to_int8_lanes(a.q.data(), out.lanes.data(), rows, cols, a.padded);
        }
        if (q4 && k.many_q4_lanes) {
            out.q4_lanes.resize(a.q.size());
            model::to_int8_lanes(out.q4.data(), out.q4_lanes.data(), rows, cols, a.padded);
        }
        return;
    }
#endif
    quant::quantize_activations(x, rows, cols, out.a);
    if (!q4_order || !k.q4_order) return;
    out.q4.resize(out.a.q.size());
    const std::int64_t blocks = rows * out.a.blocks;
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int8_t* src = out.a.q.data() + b * kB;
        std::int8_t* dst = out.q4.data() + b * kB;
        for (std::int64_t i = 0; i < kB / 2; ++i) {
            dst[i] = src[2 * i];
            dst[kB / 2 + i] = src[2 * i + 1];
        }
    }
}

void int_product_rows(Isa isa, const Matrix& w, const IntActivations& x, std::int64_t begin, std::int64_t end,
                      float* y) {
    const quant::QuantizedActivations& a = x.a;
    if (!model::is_quantized(w.dtype) || a.cols != w.cols || w.row_stride < a.padded || w.group <= 0 ||
        w.group % kB != 0)
        throw std::runtime_error(std::string("int_product_rows: bad ") + model::dtype_name(w.dtype) + " matrix [" +
                                 std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] (stride " +
                                 std::to_string(w.row_stride) + ", group " + std::to_string(w.group) +
                                 ") for activations of " + std::to_string(a.cols) + " columns");
    const IntKernels k = int_kernels_for(isa);
    const bool q4 = w.dtype == DType::Q4;
    if (w.lane_packed && !k.many_i8_lanes)
        throw std::logic_error(std::string("int_product_rows: lane-packed ") + model::dtype_name(w.dtype) +
                               " weights, which the " + k.name + " kernels do not read (the loader packs "
                               "integer weights so only for AVX-512 VNNI: cpu::lane_order_pays)");
    const ManyFn* multi = q4 ? k.many_q4 : k.many_i8;
    if (multi && q4 && x.q4.empty()) throw std::runtime_error("int_product_rows: int4 weights need the q4 order");
    const bool unpack = !multi && q4 && a.rows >= kUnpackFromRows;
    const std::int8_t* xq = q4 && !unpack && k.q4_order ? x.q4.data() : a.q.data();
    std::vector<float>& sw_buf = thread_scratch<float, struct sw_buf_scratch>();
    std::vector<std::int8_t>& row_buf = thread_scratch<std::int8_t, struct row_buf_scratch>();
    // The weight scale of each block of row o: the row's scales as they are for groups of
    // 32, else expanded into `slot` of sw_buf.
    auto scales_of = [&](std::int64_t o, std::int64_t slot) {
        const float* sw = w.row_scales(o);
        if (w.group == kB) return sw;
        float* out = sw_buf.data() + slot * a.blocks;
        const std::int64_t per = w.group / kB;  // blocks a scale covers
        for (std::int64_t b = 0; b < a.blocks; b += per) std::fill_n(out + b, std::min(per, a.blocks - b), sw[b / per]);
        return static_cast<const float*>(out);
    };
    if (multi && k.lanes && a.rows >= kLanesFromRows && end - begin >= kLanes) {
        // Many activation rows: 16 weight rows at a time, a lane each (lanes_vnni); the last
        // rows (fewer than 16) below.
        const auto row_bytes = static_cast<std::int64_t>(model::dtype_bytes(w.dtype, w.row_stride));
        if (w.group != kB && sw_buf.size() < static_cast<std::size_t>(kLanes * a.blocks))
            sw_buf.resize(static_cast<std::size_t>(kLanes * a.blocks));
        for (; begin + kLanes <= end; begin += kLanes) {
            const float* sw[kLanes];
            for (std::int64_t l = 0; l < kLanes; ++l) sw[l] = scales_of(begin + l, l);
            k.lanes(q4, w.lane_packed, reinterpret_cast<const std::uint8_t*>(w.row(begin)), row_bytes, sw, a, xq, w.rows,
                    y + begin);
        }
        if (begin == end) return;
    }
    if (w.lane_packed && (q4 ? x.q4_lanes : x.lanes).empty())
        throw std::logic_error(std::string("int_product_rows: lane-packed ") + model::dtype_name(w.dtype) +
                               " weights need the activations' lane order (prepare_int_activations with the same "
                               "ISA gives it" + (q4 ? ", in the q4 order)" : ")"));
    if (multi) {
        // A block of weight rows (kept in L2) meets every group of kRowsPerLoad activation
        // rows (in L1) in turn; with few activation rows the weights stream once.
        const auto row_bytes = static_cast<std::int64_t>(model::dtype_bytes(w.dtype, w.row_stride));
        const std::int64_t block = std::max<std::int64_t>(1, kWeightBlockBytes / std::max<std::int64_t>(1, row_bytes));
        const bool row_scale = !q4 && k.many_i8_row_scale && w.group >= a.padded;
        if (!row_scale && w.group != kB && sw_buf.size() < static_cast<std::size_t>(block * a.blocks))
            sw_buf.resize(static_cast<std::size_t>(block * a.blocks));
        std::vector<const float*>& sws = thread_scratch<const float*, struct sws_scratch>();
        sws.resize(static_cast<std::size_t>(block));
        // The kernels, and the order of the activations they read: lane-packed weights meet
        // activations in the lane order (int4: the q4 order's values); int4 in column order
        // the x4 order's kernels where there are some (the same bits).
        const std::int8_t* xr = xq;
        const ManyFn* many = q4 ? k.many_q4 : row_scale ? k.many_i8_row_scale : k.many_i8;
        if (w.lane_packed) {
            xr = q4 ? x.q4_lanes.data() : x.lanes.data();
            many = q4 ? k.many_q4_lanes : row_scale ? k.many_i8_lanes_row_scale : k.many_i8_lanes;
        } else if (q4 && !x.q4x4.empty()) {
            xr = x.q4x4.data();
            many = k.many_q4_x4;
        }
        for (std::int64_t ob = begin; ob < end; ob += block) {
            const std::int64_t oe = std::min(end, ob + block);
            for (std::int64_t o = ob; o < oe; ++o)
                sws[static_cast<std::size_t>(o - ob)] = row_scale ? w.row_scales(o) : scales_of(o, o - ob);
            for (std::int64_t s = 0; s < a.rows; s += kRowsPerLoad) {
                const int r = static_cast<int>(std::min<std::int64_t>(kRowsPerLoad, a.rows - s));
                const std::int8_t* xs[kRowsPerLoad];
                Blocks blocks[kRowsPerLoad];
                for (int i = 0; i < r; ++i) xs[i] = xr + (s + i) * a.padded;
                for (int i = 0; i < r; ++i)
                    blocks[i] = {a.sums.data() + (s + i) * a.blocks, nullptr, a.scales.data() + (s + i) * a.blocks,
                                 a.blocks};
                // The block's weight rows in one call (the kernels' many_* loops).
                many[r - 1](reinterpret_cast<const std::uint8_t*>(w.row(ob)), row_bytes, oe - ob, xs, blocks, sws.data(),
                            y + s * w.rows + ob, w.rows);
            }
        }
        return;
    }
    if (w.group != kB && sw_buf.size() < static_cast<std::size_t>(2 * a.blocks))
        sw_buf.resize(static_cast<std::size_t>(2 * a.blocks));
    const TileFn tile = q4 ? k.tile_q4 : k.tile_i8;
    if (tile && a.rows >= 2) {
        // Weight rows in pairs against activation rows in pairs; a last odd activation row
        // goes through dot_*, a last odd weight row through the loop below.
        const std::int8_t* xt = q4 ? x.q4.data() : a.q.data();
        auto blocks_of = [&](std::int64_t s, const float* sw) {
            return Blocks{a.sums.data() + s * a.blocks, sw, a.scales.data() + s * a.blocks, a.blocks};
        };
        for (; begin + 2 <= end; begin += 2) {
            const std::int64_t o = begin;
            const float* sw[2] = {scales_of(o, 0), scales_of(o + 1, 1)};
            const std::uint8_t* ws[2] = {reinterpret_cast<const std::uint8_t*>(w.row(o)),
                                         reinterpret_cast<const std::uint8_t*>(w.row(o + 1))};
            std::int64_t s = 0;
            for (; s + 2 <= a.rows; s += 2) {
                const std::int8_t* xs[2] = {xt + s * a.padded, xt + (s + 1) * a.padded};
                const Blocks kb[4] = {blocks_of(s, sw[0]), blocks_of(s + 1, sw[0]), blocks_of(s, sw[1]),
                                      blocks_of(s + 1, sw[1])};
                float out[4];
                tile(ws, xs, kb, out);
                y[s * w.rows + o] = out[0];
                y[(s + 1) * w.rows + o] = out[1];
                y[s * w.rows + o + 1] = out[2];
                y[(s + 1) * w.rows + o + 1] = out[3];
            }
            for (; s < a.rows; ++s)
                for (int r = 0; r < 2; ++r)
                    y[s * w.rows + o + r] = q4 ? k.dot_q4(ws[r], xt + s * a.padded, blocks_of(s, sw[r]))
                                               : k.dot_i8(reinterpret_cast<const std::int8_t*>(ws[r]),
                                                          xt + s * a.padded, blocks_of(s, sw[r]));
        }
    }
    if (unpack && row_buf.size() < static_cast<std::size_t>(a.padded)) row_buf.resize(static_cast<std::size_t>(a.padded));
    for (std::int64_t o = begin; o < end; ++o) {
        const float* sw = scales_of(o, 0);
        const auto* row = reinterpret_cast<const std::uint8_t*>(w.row(o));
        if (unpack) k.unpack_q4(row, a.padded, row_buf.data());
        for (std::int64_t s = 0; s < a.rows; ++s) {
            const Blocks blocks{a.sums.data() + s * a.blocks, sw, a.scales.data() + s * a.blocks, a.blocks};
            float& out = y[s * w.rows + o];
            if (!q4) out = k.dot_i8(reinterpret_cast<const std::int8_t*>(row), xq + s * a.padded, blocks);
            else if (unpack) out = k.dot_i8(row_buf.data(), xq + s * a.padded, blocks);
            else out = k.dot_q4(row, xq + s * a.padded, blocks);
        }
    }
}

}  // namespace inkling::cpu
