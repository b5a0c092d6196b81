// x86 versions of the bf16 product (engine/cpu/bf16_matmul.h has the order they keep).
//
// AVX-512: a tile is MR activation rows × NR weight rows, one zmm accumulator an element
// (its 16 lanes are the order's acc[0..15]). A chunk step loads each weight row's 32
// values once and uses them for every activation row of the tile:
//   FMA:  the odd-indexed weights are the row's 16-bit words 1, 3, … kept in place (a word
//         mask), the even ones the words 0, 2, … shifted up — both exact f32 — against the
//         activations packed as [16 odd | 16 even] f32;
//   Dot:  vdpbf16ps on the raw row and the bf16-packed activations.
// Blocking: with more activation rows than one tile, a thread's weight rows are taken in
// blocks that fit in L2, and every activation tile passes over the block (its slice of at
// most kKc chunks stays in L1); accumulators cross chunk slices through a small buffer
// (a zmm stored and reloaded is exact). With at most MR rows the weights stream from
// memory once, prefetched.
#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/x86/bf16_matmul.h"

#include "engine/cpu/simd.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

namespace inkling::cpu::x86 {
namespace {

using model::Matrix;

constexpr std::int64_t kChunk = 32;

// ---- AVX2 --------------------------------------------------------------------------------
#define INKLING_AVX2 __attribute__((target("avx2,fma")))

INKLING_AVX2 float finish8_avx2(__m256 h8) {
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

// One weight row against R activation rows (the widened chunk reused R times); each
// element's 16 lanes in two ymm (lanes 0-7, 8-15).
template <int R>
INKLING_AVX2 void dot_avx2(const std::uint16_t* w, std::int64_t cols, const float* const* a, std::int64_t chunks,
                           float* out) {
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    __m256 lo_acc[R], hi_acc[R];
    for (int r = 0; r < R; ++r) lo_acc[r] = hi_acc[r] = _mm256_setzero_ps();
    alignas(32) std::uint16_t tail[kChunk];
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::uint16_t* src = w + c * kChunk;
        if ((c + 1) * kChunk > cols) {
            std::memset(tail, 0, sizeof tail);
            std::memcpy(tail, src, static_cast<std::size_t>(cols - c * kChunk) * 2);
            src = tail;
        }
        const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
        const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 16));
        const __m256 odd0 = _mm256_castsi256_ps(_mm256_and_si256(r0, hi)), odd1 = _mm256_castsi256_ps(_mm256_and_si256(r1, hi));
        const __m256 even0 = _mm256_castsi256_ps(_mm256_slli_epi32(r0, 16));
        const __m256 even1 = _mm256_castsi256_ps(_mm256_slli_epi32(r1, 16));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const float* x = a[r] + c * kChunk;
            lo_acc[r] = _mm256_fmadd_ps(odd0, _mm256_loadu_ps(x), lo_acc[r]);
            hi_acc[r] = _mm256_fmadd_ps(odd1, _mm256_loadu_ps(x + 8), hi_acc[r]);
            lo_acc[r] = _mm256_fmadd_ps(even0, _mm256_loadu_ps(x + 16), lo_acc[r]);
            hi_acc[r] = _mm256_fmadd_ps(even1, _mm256_loadu_ps(x + 24), hi_acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) out[r] = finish8_avx2(_mm256_add_ps(lo_acc[r], hi_acc[r]));
}

// ---- AVX-512 -------------------------------------------------------------------------------
#define INKLING_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))
#define INKLING_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")))

// Tile shape and blocking (measured on the project's VMs: docs/performance.md).
constexpr int kMR = 6, kNR = 4;    // activation rows × weight rows of a blocked tile (29 zmm)
constexpr int kGemvNR = 8;         // weight rows of a tile when the activations are one tile
constexpr int kWideMR = 8, kWideNR = 3;  // one streaming tile for kMR < n ≤ 8 rows (28 zmm)
constexpr std::int64_t kL1Bytes = 24 << 10;   // an activation tile's chunk slice
constexpr std::int64_t kL2Bytes = 512 << 10;  // a block of weight rows
constexpr std::int64_t kAhead = 16;           // chunks (of 64 bytes) prefetched ahead in each streamed weight row

struct alignas(64) Lane16 {
    float v[16];
};

struct Tile {
    const void* x;                // first activation row of the tile
    std::int64_t xs;              // elements between activation rows
    const std::uint16_t* w;       // first weight row
    const std::uint16_t* wnext;   // the next tile's first weight row (prefetched past this one's end)
    std::int64_t ws;              // elements between weight rows
    std::int64_t c0, c1;          // chunks [c0, c1)
    std::int64_t chunks;          // chunks of a whole row (prefetching runs ahead within it)
    bool masked_last;             // chunk c1 - 1 is the row's partial last chunk
    __mmask32 tail;               // its columns
    Lane16* part;                 // accumulators between chunk slices (MR·NR), or null
    bool first, last;             // slice starts / ends the row
    float* y;                     // output of (first activation row, first weight row)
    std::int64_t ys;              // elements between output rows
};

INKLING_AVX512 inline float finish16(__m512 a) {
    const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

// One chunk of the FMA tile. `Full`: all 32 columns real (else `tail` says which are).
template <int MR, int NR, bool Full, bool Prefetch>
INKLING_AVX512 inline void step_fma(__m512 (&acc)[MR][NR], const Tile& t, std::int64_t c, const std::uint16_t* pf) {
    const float* x = static_cast<const float*>(t.x) + c * kChunk;
    const std::uint16_t* w = t.w + c * kChunk;
    const __mmask32 cols = Full ? ~__mmask32{0} : t.tail;
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int o = 0; o < NR; ++o) {
        if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(pf + o * t.ws), _MM_HINT_T0);
        wv[o] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(cols & 0xaaaaaaaau, w + o * t.ws));
    }
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s) {
        const __m512 xv = _mm512_loadu_ps(x + s * t.xs);
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) acc[s][o] = _mm512_fmadd_ps(wv[o], xv, acc[s][o]);
    }
#pragma GCC unroll 8
    for (int o = 0; o < NR; ++o) {
        const __m512i raw = Full ? _mm512_loadu_si512(w + o * t.ws) : _mm512_maskz_loadu_epi16(cols, w + o * t.ws);
        wv[o] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
    }
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s) {
        const __m512 xv = _mm512_loadu_ps(x + s * t.xs + 16);
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) acc[s][o] = _mm512_fmadd_ps(wv[o], xv, acc[s][o]);
    }
}

template <int MR, int NR, bool Full, bool Prefetch>
INKLING_AVX512_BF16 inline void step_dot(__m512 (&acc)[MR][NR], const Tile& t, std::int64_t c, const std::uint16_t* pf) {
    const std::uint16_t* x = static_cast<const std::uint16_t*>(t.x) + c * kChunk;
    const std::uint16_t* w = t.w + c * kChunk;
    __m512i wv[NR];
#pragma GCC unroll 8
    for (int o = 0; o < NR; ++o) {
        if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(pf + o * t.ws), _MM_HINT_T0);
        wv[o] = Full ? _mm512_loadu_si512(w + o * t.ws) : _mm512_maskz_loadu_epi16(t.tail, w + o * t.ws);
    }
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s) {
        const __m512i xv = _mm512_loadu_si512(x + s * t.xs);
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) acc[s][o] = _mm512_dpbf16_ps(acc[s][o], (__m512bh)wv[o], (__m512bh)xv);
    }
}

// The tile body, shared by both kernels (`Step` is step_fma or step_dot).
#define INKLING_TILE_BODY(STEP)                                                                \
    __m512 acc[MR][NR];                                                                        \
    _Pragma("GCC unroll 8") for (int s = 0; s < MR; ++s)                                       \
        _Pragma("GCC unroll 8") for (int o = 0; o < NR; ++o)                                   \
            acc[s][o] = t.first ? _mm512_setzero_ps() : _mm512_load_ps(t.part[s * NR + o].v);  \
    const std::int64_t full_end = t.masked_last ? t.c1 - 1 : t.c1;                             \
    std::int64_t c = t.c0;                                                                     \
    if (Prefetch) {                                                                            \
        /* kAhead chunks ahead in each row; the last kAhead chunks' prefetches are the */      \
        /* next tile's first ones, so its rows start warm. */                                  \
        const std::int64_t split = std::clamp(t.chunks - kAhead, c, full_end);                 \
        for (; c < split; ++c) STEP<MR, NR, true, true>(acc, t, c, t.w + (c + kAhead) * kChunk); \
        for (; c < full_end; ++c)                                                              \
            STEP<MR, NR, true, true>(acc, t, c, t.wnext + (c + kAhead - t.chunks) * kChunk);   \
    }                                                                                          \
    for (; c < full_end; ++c) STEP<MR, NR, true, false>(acc, t, c, nullptr);                   \
    if (t.masked_last) STEP<MR, NR, false, false>(acc, t, t.c1 - 1, nullptr);                  \
    _Pragma("GCC unroll 8") for (int s = 0; s < MR; ++s)                                       \
        _Pragma("GCC unroll 8") for (int o = 0; o < NR; ++o) {                                 \
        if (t.last) t.y[s * t.ys + o] = finish16(acc[s][o]);                                   \
        else _mm512_store_ps(t.part[s * NR + o].v, acc[s][o]);                                 \
    }

template <int MR, int NR, bool Prefetch>
INKLING_AVX512 void tile_fma(const Tile& t) {
    INKLING_TILE_BODY(step_fma)
}

template <int MR, int NR, bool Prefetch>
INKLING_AVX512_BF16 void tile_dot(const Tile& t) {
    INKLING_TILE_BODY(step_dot)
}

using TileFn = void (*)(const Tile&);

// fns[mr - 1][nr - 1] for mr ≤ MaxMR, nr ≤ MaxNR.
template <bool Dot, bool Prefetch, int MaxMR, int MaxNR>
struct Table {
    template <std::size_t... I>
    static constexpr std::array<TileFn, MaxMR * MaxNR> make(std::index_sequence<I...>) {
        if constexpr (Dot) return {&tile_dot<static_cast<int>(I / MaxNR) + 1, static_cast<int>(I % MaxNR) + 1, Prefetch>...};
        else return {&tile_fma<static_cast<int>(I / MaxNR) + 1, static_cast<int>(I % MaxNR) + 1, Prefetch>...};
    }
    static constexpr std::array<TileFn, MaxMR * MaxNR> fns = make(std::make_index_sequence<MaxMR * MaxNR>{});
    static TileFn get(std::int64_t mr, std::int64_t nr) { return fns[static_cast<std::size_t>((mr - 1) * MaxNR + nr - 1)]; }
};

template <bool Dot>
void rows_avx512(const Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end, float* y) {
    const std::int64_t n = x.rows, chunks = x.chunks, last_cols = w.cols - (chunks - 1) * kChunk;
    const void* xdata = Dot ? static_cast<const void*>(x.bf16.data()) : static_cast<const void*>(x.f32.data());
    const std::int64_t xbytes = Dot ? 2 : 4;
    auto xrow = [&](std::int64_t s) { return static_cast<const std::byte*>(xdata) + s * x.stride * xbytes; };
    auto wrow = [&](std::int64_t o) { return reinterpret_cast<const std::uint16_t*>(w.row(o)); };
    Tile t{};
    t.xs = x.stride;
    t.ws = w.row_stride;
    t.tail = last_cols == kChunk ? ~__mmask32{0} : static_cast<__mmask32>((1u << last_cols) - 1);
    t.ys = w.rows;
    t.chunks = chunks;
    // Few activation rows (a batched decode step): one tile of them, every weight row read
    // once from memory. 7 or 8 rows in two blocked tiles (6 + 1 or 2) took 1.3-1.5x the time
    // of 6 rows on a 1024 × 1024 matrix; one 8 × 3 tile takes 1.1x.
    if (n <= kWideMR) {
        using One = Table<Dot, true, 1, kGemvNR>;
        using Few = Table<Dot, true, kMR, kNR>;
        using Wide = Table<Dot, true, kWideMR, kWideNR>;
        const std::int64_t nr_max = n == 1 ? kGemvNR : n <= kMR ? kNR : kWideNR;
        t.x = xrow(0);
        t.c0 = 0;
        t.c1 = chunks;
        t.masked_last = last_cols != kChunk;
        t.first = t.last = true;
        for (std::int64_t o = begin; o < end; o += nr_max) {
            const std::int64_t nr = std::min(nr_max, end - o);
            t.w = wrow(o);
            t.wnext = o + nr < end ? wrow(o + nr) : t.w;
            t.y = y + o;
            (n == 1 ? One::get(1, nr) : n <= kMR ? Few::get(n, nr) : Wide::get(n, nr))(t);
        }
        return;
    }
    // The first activation tile over a block reads its weights from memory: prefetched as
    // above; the other tiles find them in L2.
    using T = Table<Dot, false, kMR, kNR>;
    using First = Table<Dot, true, kMR, kNR>;
    const std::int64_t kc = std::max<std::int64_t>(1, kL1Bytes / (kMR * kChunk * xbytes));
    const std::int64_t nc =
        std::clamp<std::int64_t>(kL2Bytes / (w.cols * 2) / kNR * kNR, kNR, 64 * kNR);
    std::vector<Lane16>& part = thread_scratch<Lane16, struct part_scratch>();
    if (part.size() < static_cast<std::size_t>(kMR * nc)) part.resize(static_cast<std::size_t>(kMR * nc));
    for (std::int64_t jc = begin; jc < end; jc += nc) {
        const std::int64_t je = std::min(end, jc + nc);
        for (std::int64_t s0 = 0; s0 < n; s0 += kMR) {
            const std::int64_t mr = std::min<std::int64_t>(kMR, n - s0);
            t.x = xrow(s0);
            for (std::int64_t c0 = 0; c0 < chunks; c0 += kc) {
                t.c0 = c0;
                t.c1 = std::min(chunks, c0 + kc);
                t.masked_last = t.c1 == chunks && last_cols != kChunk;
                t.first = c0 == 0;
                t.last = t.c1 == chunks;
                for (std::int64_t o = jc; o < je; o += kNR) {
                    const std::int64_t nr = std::min<std::int64_t>(kNR, je - o);
                    t.w = wrow(o);
                    t.wnext = o + nr < end ? wrow(o + nr) : t.w;
                    t.part = part.data() + (o - jc) / kNR * kMR * kNR;
                    t.y = y + s0 * w.rows + o;
                    (s0 == 0 ? First::get(mr, nr) : T::get(mr, nr))(t);
                }
            }
        }
    }
}

// vcvtneps2bf16's rounding, as f32 bits (the bf16 value in the upper half): round to
// nearest even; ±0 for zeros and subnormals; NaN quiet.
INKLING_AVX512 inline __m512i round_bits(__m512 v) {
    const __m512i b = _mm512_castps_si512(v);
    const __m512i upper = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb), upper);
    const __m512i mag = _mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_and_si512(_mm512_or_si512(b, _mm512_set1_epi32(0x00400000)), upper));
    const __mmask16 tiny = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(b, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

INKLING_AVX512 void pack(bool round, const float* x, Bf16Activations& out) {
    // Columns 2j+1 and 2j of a chunk (as the concatenation of its two halves).
    alignas(64) static constexpr std::int32_t kOdd[16] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
    alignas(64) static constexpr std::int32_t kEven[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
    const __m512i odd = _mm512_load_si512(kOdd), even = _mm512_load_si512(kEven);
    for (std::int64_t s = 0; s < out.rows; ++s) {
        const float* src = x + s * out.cols;
        for (std::int64_t c = 0; c < out.chunks; ++c) {
            const std::int64_t at = c * kChunk, left = std::min<std::int64_t>(kChunk, out.cols - at);
            const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
            const __mmask16 m1 = left >= 32 ? __mmask16(0xffff)
                                 : left > 16 ? static_cast<__mmask16>((1u << (left - 16)) - 1)
                                             : __mmask16(0);
            __m512 v0 = _mm512_maskz_loadu_ps(m0, src + at), v1 = _mm512_maskz_loadu_ps(m1, src + at + 16);
            if (out.dot) {
                // Natural order, rounded (the packer is only used so with round = true).
                std::uint16_t* dst = out.bf16.data() + s * out.stride + at;
                const __m512i r0 = _mm512_srli_epi32(round_bits(v0), 16), r1 = _mm512_srli_epi32(round_bits(v1), 16);
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(r0));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16), _mm512_cvtepi32_epi16(r1));
                continue;
            }
            if (round) {
                v0 = _mm512_castsi512_ps(round_bits(v0));
                v1 = _mm512_castsi512_ps(round_bits(v1));
            }
            float* dst = out.f32.data() + s * out.stride + at;
            _mm512_storeu_ps(dst, _mm512_permutex2var_ps(v0, odd, v1));
            _mm512_storeu_ps(dst + 16, _mm512_permutex2var_ps(v0, even, v1));
        }
    }
}

}  // namespace

void bf16_rows_avx2(const Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end, float* y) {
    for (std::int64_t o = begin; o < end; ++o) {
        const auto* row = reinterpret_cast<const std::uint16_t*>(w.row(o));
        std::int64_t s = 0;
        const float* a[4];
        float out[4];
        for (; s + 4 <= x.rows; s += 4) {
            for (int r = 0; r < 4; ++r) a[r] = x.f32.data() + (s + r) * x.stride;
            dot_avx2<4>(row, w.cols, a, x.chunks, out);
            for (int r = 0; r < 4; ++r) y[(s + r) * w.rows + o] = out[r];
        }
        for (; s < x.rows; ++s) {
            a[0] = x.f32.data() + s * x.stride;
            dot_avx2<1>(row, w.cols, a, x.chunks, out);
            y[s * w.rows + o] = out[0];
        }
    }
}

void bf16_rows_avx512(const Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end, float* y) {
    rows_avx512<false>(w, x, begin, end, y);
}

void bf16_rows_avx512_dot(const Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end,
                          float* y) {
    rows_avx512<true>(w, x, begin, end, y);
}

void pack_avx512(bool round, const float* x, Bf16Activations& out) { pack(round, x, out); }

}  // namespace inkling::cpu::x86
