// x86 integer kernels for AVX-512 VNNI (x86/int_kernels.h; the pattern they keep is
// engine/cpu/int_kernels.h's).
#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/x86/int_kernels.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/x86/int_common.h"

namespace inkling::cpu::x86 {
namespace {

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

// (See many_avx2, int_kernels_avx2.cpp.)
template <RowsFn Row, int R, class... A>
INKLING_VNNI_ENTRY void many_vnni(A... a) {
    each_row<Row, R>(a...);
}

}  // namespace

float dot_i8_vnni(const std::int8_t* w, const std::int8_t* x, const Blocks& k) {
    return one_row<rows_i8_vnni<1>, std::int8_t>(w, x, k);
}
float dot_q4_vnni(const std::uint8_t* w, const std::int8_t* x, const Blocks& k) {
    return one_row<rows_q4_vnni<1>, std::uint8_t>(w, x, k);
}

constexpr ManyFn kI8ManyVnni[kRowsPerLoad] = {many_vnni<rows_i8_vnni<1>, 1>, many_vnni<rows_i8_vnni<2>, 2>,
                                              many_vnni<rows_i8_vnni<3>, 3>, many_vnni<rows_i8_vnni<4>, 4>};
constexpr ManyFn kI8RowScaleManyVnni[kRowsPerLoad] = {
    many_vnni<rows_i8_vnni<1, true>, 1>, many_vnni<rows_i8_vnni<2, true>, 2>, many_vnni<rows_i8_vnni<3, true>, 3>,
    many_vnni<rows_i8_vnni<4, true>, 4>};
constexpr ManyFn kI8LanesManyVnni[kRowsPerLoad] = {
    many_vnni<rows_i8_lanes_vnni<1>, 1>, many_vnni<rows_i8_lanes_vnni<2>, 2>, many_vnni<rows_i8_lanes_vnni<3>, 3>,
    many_vnni<rows_i8_lanes_vnni<4>, 4>};
constexpr ManyFn kI8LanesRowScaleManyVnni[kRowsPerLoad] = {
    many_vnni<rows_i8_lanes_vnni<1, true>, 1>, many_vnni<rows_i8_lanes_vnni<2, true>, 2>,
    many_vnni<rows_i8_lanes_vnni<3, true>, 3>, many_vnni<rows_i8_lanes_vnni<4, true>, 4>};
constexpr ManyFn kQ4LanesManyVnni[kRowsPerLoad] = {
    many_vnni<rows_q4_lanes_vnni<1>, 1>, many_vnni<rows_q4_lanes_vnni<2>, 2>, each_row<rows_q4_lanes_vnni<3>, 3>,
    each_row<rows_q4_lanes_vnni<4>, 4>};
constexpr ManyFn kQ4ManyVnni[kRowsPerLoad] = {many_vnni<rows_q4_vnni<1>, 1>, many_vnni<rows_q4_vnni<2>, 2>,
                                              many_vnni<rows_q4_vnni<3>, 3>, many_vnni<rows_q4_vnni<4>, 4>};
constexpr ManyFn kQ4X4ManyVnni[kRowsPerLoad] = {many_vnni<rows_q4_x4_vnni<1>, 1>, many_vnni<rows_q4_x4_vnni<2>, 2>,
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

}  // namespace inkling::cpu::x86
