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
// AVX2: the same scheme on ymm (an element's 16 lanes in two registers); its blocked tiles
// run one half of the lanes at a time so that a 3 × 3 tile fits 16 registers.
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

// Shared by both ISAs' tiles.
constexpr std::int64_t kAhead = 16;  // chunks (of 64 bytes) prefetched ahead in each streamed weight row

struct alignas(64) Lane16 {
    float v[16];
};

// ---- AVX2 --------------------------------------------------------------------------------
// The same tiles on 16 ymm registers: an element's 16 lanes are two ymm (lanes 0-7 from the
// chunk's first 16 weights, lanes 8-15 from the last 16), so a tile of MR × NR holds 2·MR·NR
// accumulators. Shapes (measured on AMD Zen 3, docs/performance.md): one activation row
// against 4 weight rows (4 streams in flight, 8 independent FMA chains: the one-row kernel
// with 2 chains was latency-bound); 2-3 rows × 2 weight rows and 4-8 rows × 1 while the
// weights stream once (7-8 rows so took 0.75-0.9x the time of the blocked tiles on 1024 × 1024
// and 1024 × 2048, as fast on 32000 × 1024: a batched decode step's shapes); from 9 rows on,
// 3 × 3 tiles over L2 blocks of weight rows, one half of the lanes at a time (below).
#define INKLING_AVX2 __attribute__((target("avx2,fma")))

constexpr int kAvx2MR = 3, kAvx2NR = 3;           // the blocked tile (9 accumulators of one half)
constexpr int kAvx2GemvNR = 4;                    // weight rows against one activation row
constexpr int kAvx2FewMR = 3, kAvx2FewNR = 2, kAvx2WideMR = 8;  // streaming: ≤ 3 rows × 2, ≤ 8 rows × 1
constexpr std::int64_t kAvx2L1Bytes = 12 << 10;   // an activation tile's chunk slice
constexpr std::int64_t kAvx2L2Bytes = 256 << 10;  // a block of weight rows (Zen 3 has 512 KB of L2)
// Chunks prefetched ahead in each streamed row (the last ones: in the next tile's rows). On
// Zen 3, 64 read 1024-column rows (an lm_head, every projection of a D = 1024 model) ~15 %
// faster than 16 and 4096-column ones as fast.
constexpr std::int64_t kAvx2Ahead = 64;

// What a tile needs besides its activations (both ISAs' tiles).
struct TileRange {
    std::int64_t xs;              // elements between activation rows
    const std::uint16_t* w;       // first weight row
    const std::uint16_t* wnext;   // the next tile's first weight row (prefetched past this one's end)
    std::int64_t ws;              // elements between weight rows
    std::int64_t c0, c1;          // chunks [c0, c1)
    std::int64_t chunks;          // chunks of a whole row (prefetching runs ahead within it)
    Lane16* part;                 // accumulators between chunk slices (MR·NR), or null
    bool first, last;             // slice starts / ends the row
    float* y;                     // output of (first activation row, first weight row)
    std::int64_t ys;              // elements between output rows
    std::int64_t yo = 1;          // elements between the outputs of two weight rows
};

// Decode (one activation row) over weight rows [begin, end): the rows in NR contiguous
// parts, a tile of NR taking the next row of each, so each of its NR streams runs on through
// memory (rows are contiguous) — instead of NR short streams a tile sharing pages, which
// Zen 3's prefetchers follow badly on 2 KB rows ([32000 × 1024] read at 23 -> 27-32 GB/s,
// [1024 × 1024] 20-23 -> 27-29; where it runs: bf16_decode_interleave_active). run() runs
// one full tile; returns the first row left over (fewer than NR), for the contiguous order.
template <int NR, class Run>
inline std::int64_t interleaved_tiles(TileRange& t, const Matrix& w, std::int64_t begin, std::int64_t end, float* y,
                                      Run run) {
    const std::int64_t q = (end - begin) / NR;
    if (q == 0) return begin;
    t.ws = q * w.row_stride;
    t.yo = q;
    t.c0 = 0;
    t.c1 = t.chunks;
    t.first = t.last = true;
    for (std::int64_t i = 0; i < q; ++i) {
        t.w = reinterpret_cast<const std::uint16_t*>(w.row(begin + i));
        t.wnext = i + 1 < q ? t.w + w.row_stride : t.w;
        t.y = y + begin + i;
        run();
    }
    t.ws = w.row_stride;
    t.yo = 1;
    return begin + q * NR;
}

// The streaming order (few activation rows, one tile of them): weight rows [begin, end) in
// tiles of nr_max, each read once from memory; run(nr) runs one.
template <class Run>
inline void streamed_tiles(TileRange& t, const Matrix& w, std::int64_t begin, std::int64_t end, std::int64_t nr_max,
                           float* y, Run run) {
    auto wrow = [&](std::int64_t o) { return reinterpret_cast<const std::uint16_t*>(w.row(o)); };
    t.c0 = 0;
    t.c1 = t.chunks;
    t.first = t.last = true;
    for (std::int64_t o = begin; o < end; o += nr_max) {
        const std::int64_t nr = std::min(nr_max, end - o);
        t.w = wrow(o);
        t.wnext = o + nr < end ? wrow(o + nr) : t.w;
        t.y = y + o;
        run(nr);
    }
}

// The blocked order both ISAs' tiles run in: weight rows [begin, end) in blocks of L2
// bytes (a multiple of NR rows); every tile of MR activation rows passes over a block one
// slice of `kc` chunks (in L1) at a time. Sets t's range fields, then run(s0, mr, nr) sets
// the ISA's own (activations, partial chunk) and runs the tile.
template <int MR, int NR, class Run>
inline void blocked_tiles(TileRange& t, const Matrix& w, std::int64_t n, std::int64_t begin, std::int64_t end,
                          std::int64_t kc, std::int64_t l2_bytes, float* y, Run run) {
    const std::int64_t nc = std::clamp<std::int64_t>(l2_bytes / (w.cols * 2) / NR * NR, NR, 64 * NR);
    std::vector<Lane16>& part = thread_scratch<Lane16, struct part_scratch>();
    if (part.size() < static_cast<std::size_t>(MR * nc)) part.resize(static_cast<std::size_t>(MR * nc));
    auto wrow = [&](std::int64_t o) { return reinterpret_cast<const std::uint16_t*>(w.row(o)); };
    for (std::int64_t jc = begin; jc < end; jc += nc) {
        const std::int64_t je = std::min(end, jc + nc);
        for (std::int64_t s0 = 0; s0 < n; s0 += MR) {
            const std::int64_t mr = std::min<std::int64_t>(MR, n - s0);
            for (std::int64_t c0 = 0; c0 < t.chunks; c0 += kc) {
                t.c0 = c0;
                t.c1 = std::min(t.chunks, c0 + kc);
                t.first = c0 == 0;
                t.last = t.c1 == t.chunks;
                for (std::int64_t o = jc; o < je; o += NR) {
                    const std::int64_t nr = std::min<std::int64_t>(NR, je - o);
                    t.w = wrow(o);
                    t.wnext = o + nr < end ? wrow(o + nr) : t.w;
                    t.part = part.data() + (o - jc) / NR * MR * NR;
                    t.y = y + s0 * w.rows + o;
                    run(s0, mr, nr);
                }
            }
        }
    }
}

struct Tile2 : TileRange {
    const float* x;               // first activation row of the tile
    std::int64_t tail_cols;       // real columns of chunk c1 - 1 when it is the row's partial last one, else 0
};

INKLING_AVX2 float finish8_avx2(__m256 h8) {
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

// One half of a chunk (H = 0: lanes 0-7 from its first 16 weights; 1: lanes 8-15) for `w`
// rows `ws` apart (the tile's, or a zero-padded copy of a partial chunk).
template <int MR, int NR, int H, bool Prefetch>
INKLING_AVX2 inline void half_step_avx2(__m256 (&acc)[MR][NR], const float* x, std::int64_t xs, const std::uint16_t* w,
                                        std::int64_t ws, const std::uint16_t* pf, std::int64_t pfs) {
    const __m256i upper = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int o = 0; o < NR; ++o) {
        if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(pf + o * pfs), _MM_HINT_T0);
        wv[o] = _mm256_castsi256_ps(
            _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + o * ws + 16 * H)), upper));
    }
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s) {
        const __m256 xv = _mm256_loadu_ps(x + s * xs + 8 * H);
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) acc[s][o] = _mm256_fmadd_ps(wv[o], xv, acc[s][o]);
    }
#pragma GCC unroll 8
    for (int o = 0; o < NR; ++o)
        wv[o] = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + o * ws + 16 * H)), 16));
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s) {
        const __m256 xv = _mm256_loadu_ps(x + s * xs + 16 + 8 * H);
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) acc[s][o] = _mm256_fmadd_ps(wv[o], xv, acc[s][o]);
    }
}

// A whole chunk, both halves.
template <int MR, int NR, bool Prefetch>
INKLING_AVX2 inline void step_avx2(__m256 (&acc)[2][MR][NR], const float* x, std::int64_t xs, const std::uint16_t* w,
                                   std::int64_t ws, const std::uint16_t* pf, std::int64_t pfs) {
    half_step_avx2<MR, NR, 0, Prefetch>(acc[0], x, xs, w, ws, pf, pfs);
    half_step_avx2<MR, NR, 1, false>(acc[1], x, xs, w, ws, nullptr, 0);
}

template <int MR, int NR, bool Prefetch>
INKLING_AVX2 void tile_avx2(const Tile2& t) {
    __m256 acc[2][MR][NR];
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s)
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o)
            for (int h = 0; h < 2; ++h)
                acc[h][s][o] = t.first ? _mm256_setzero_ps() : _mm256_load_ps(t.part[s * NR + o].v + 8 * h);
    const std::int64_t full_end = t.tail_cols ? t.c1 - 1 : t.c1;
    std::int64_t c = t.c0;
    if (Prefetch) {
        // As the AVX-512 tiles: the last chunks prefetch the next tile's first ones.
        constexpr std::int64_t ahead = kAvx2Ahead;
        const std::int64_t split = std::clamp(t.chunks - ahead, c, full_end);
        for (; c < split; ++c)
            step_avx2<MR, NR, true>(acc, t.x + c * kChunk, t.xs, t.w + c * kChunk, t.ws, t.w + (c + ahead) * kChunk, t.ws);
        for (; c < full_end; ++c)
            step_avx2<MR, NR, true>(acc, t.x + c * kChunk, t.xs, t.w + c * kChunk, t.ws,
                                    t.wnext + (c + ahead - t.chunks) * kChunk, t.ws);
    }
    for (; c < full_end; ++c) step_avx2<MR, NR, false>(acc, t.x + c * kChunk, t.xs, t.w + c * kChunk, t.ws, nullptr, 0);
    if (t.tail_cols) {
        // Columns past the row's end count as +0 (they may hold anything, even NaN).
        alignas(32) std::uint16_t tail[NR][kChunk] = {};
        for (int o = 0; o < NR; ++o)
            std::memcpy(tail[o], t.w + o * t.ws + c * kChunk, static_cast<std::size_t>(t.tail_cols) * 2);
        step_avx2<MR, NR, false>(acc, t.x + c * kChunk, t.xs, tail[0], kChunk, nullptr, 0);
    }
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s)
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) {
            if (t.last) {
                t.y[s * t.ys + o * t.yo] = finish8_avx2(_mm256_add_ps(acc[0][s][o], acc[1][s][o]));
            } else {
                _mm256_store_ps(t.part[s * NR + o].v, acc[0][s][o]);
                _mm256_store_ps(t.part[s * NR + o].v + 8, acc[1][s][o]);
            }
        }
}

// The blocked tiles keep one half of each element's lanes at a time (MR·NR accumulators, so
// a tile can be larger on 16 registers): over a group of kAvx2Group chunks lanes 0-7 run,
// then lanes 8-15 over the same chunks (their weights still in L1), the accumulators
// crossing groups through t.part. Each lane still takes its chunks in order.
constexpr std::int64_t kAvx2Group = 16;

// Chunks [g, ge) of one half; `tail` holds the row's partial last chunk (if any) zero-padded.
template <int MR, int NR, int H, bool Prefetch>
INKLING_AVX2 inline void half_pass_avx2(const Tile2& t, std::int64_t g, std::int64_t ge, std::int64_t full_end,
                                        const std::uint16_t* tail, bool zero) {
    __m256 acc[MR][NR];
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s)
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) acc[s][o] = zero ? _mm256_setzero_ps() : _mm256_load_ps(t.part[s * NR + o].v + 8 * H);
    const std::int64_t e = std::min(ge, full_end);
    std::int64_t c = g;
    if (Prefetch && H == 0) {
        // The first tile over a block brings its weights from memory (the next tile's rows
        // for the row's last kAhead chunks).
        for (; c < e; ++c) {
            const bool next = c + kAhead >= t.chunks;
            const std::uint16_t* pf = next ? t.wnext + (c + kAhead - t.chunks) * kChunk : t.w + (c + kAhead) * kChunk;
            half_step_avx2<MR, NR, H, true>(acc, t.x + c * kChunk, t.xs, t.w + c * kChunk, t.ws, pf, t.ws);
        }
    }
    for (; c < e; ++c)
        half_step_avx2<MR, NR, H, false>(acc, t.x + c * kChunk, t.xs, t.w + c * kChunk, t.ws, nullptr, 0);
    if (c < ge) half_step_avx2<MR, NR, H, false>(acc, t.x + c * kChunk, t.xs, tail, kChunk, nullptr, 0);
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s)
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) _mm256_store_ps(t.part[s * NR + o].v + 8 * H, acc[s][o]);
}

template <int MR, int NR, bool Prefetch>
INKLING_AVX2 void tile_halves_avx2(const Tile2& t) {
    const std::int64_t full_end = t.tail_cols ? t.c1 - 1 : t.c1;
    alignas(32) std::uint16_t tail[NR][kChunk] = {};
    if (t.tail_cols)
        for (int o = 0; o < NR; ++o)
            std::memcpy(tail[o], t.w + o * t.ws + full_end * kChunk, static_cast<std::size_t>(t.tail_cols) * 2);
    for (std::int64_t g = t.c0; g < t.c1; g += kAvx2Group) {
        const std::int64_t ge = std::min(t.c1, g + kAvx2Group);
        const bool zero = t.first && g == t.c0;
        half_pass_avx2<MR, NR, 0, Prefetch>(t, g, ge, full_end, tail[0], zero);
        half_pass_avx2<MR, NR, 1, Prefetch>(t, g, ge, full_end, tail[0], zero);
    }
    if (!t.last) return;
#pragma GCC unroll 8
    for (int s = 0; s < MR; ++s)
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o)
            t.y[s * t.ys + o * t.yo] =
                finish8_avx2(_mm256_add_ps(_mm256_load_ps(t.part[s * NR + o].v), _mm256_load_ps(t.part[s * NR + o].v + 8)));
}

using Tile2Fn = void (*)(const Tile2&);

// fns[mr - 1][nr - 1] for mr ≤ MaxMR, nr ≤ MaxNR: tile_halves_avx2 if `Halves`, else tile_avx2.
template <bool Halves, bool Prefetch, int MaxMR, int MaxNR>
struct Table2 {
    template <int MR, int NR>
    static constexpr Tile2Fn one() {
        if constexpr (Halves) return &tile_halves_avx2<MR, NR, Prefetch>;
        else return &tile_avx2<MR, NR, Prefetch>;
    }
    template <std::size_t... I>
    static constexpr std::array<Tile2Fn, MaxMR * MaxNR> make(std::index_sequence<I...>) {
        return {one<static_cast<int>(I / MaxNR) + 1, static_cast<int>(I % MaxNR) + 1>()...};
    }
    static constexpr std::array<Tile2Fn, MaxMR * MaxNR> fns = make(std::make_index_sequence<MaxMR * MaxNR>{});
    static Tile2Fn get(std::int64_t mr, std::int64_t nr) {
        return fns[static_cast<std::size_t>((mr - 1) * MaxNR + nr - 1)];
    }
};

void rows_avx2(const Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end, float* y) {
    const std::int64_t n = x.rows, chunks = x.chunks, last_cols = w.cols - (chunks - 1) * kChunk;
    Tile2 t{};
    t.xs = x.stride;
    t.ws = w.row_stride;
    t.ys = w.rows;
    t.chunks = chunks;
    if (n <= kAvx2WideMR) {
        // Few activation rows: one tile of them, every weight row read once from memory.
        using One = Table2<false, true, 1, kAvx2GemvNR>;
        using Few = Table2<false, true, kAvx2FewMR, kAvx2FewNR>;
        using Wide = Table2<false, true, kAvx2WideMR, 1>;
        const std::int64_t nr_max = n == 1 ? kAvx2GemvNR : n <= kAvx2FewMR ? kAvx2FewNR : 1;
        t.x = x.f32.data();
        t.tail_cols = last_cols == kChunk ? 0 : last_cols;
        // A batched step's few rows interleaved too, as on AVX-512 (rows_avx512 says why):
        // mid model, --isa avx2 on Zen 4, 2 / 8 sessions 105-127 / 200-205 tok/s in all ->
        // 147-173 / 228-246.
        auto tile = [&](std::int64_t nr) {
            (n == 1 ? One::get(1, nr) : n <= kAvx2FewMR ? Few::get(n, nr) : Wide::get(n, 1))(t);
        };
        if (n == 1 && bf16_decode_interleave_active())
            begin = interleaved_tiles<kAvx2GemvNR>(t, w, begin, end, y, [&] { tile(kAvx2GemvNR); });
        else if (n <= kAvx2FewMR && bf16_decode_interleave_active())
            begin = interleaved_tiles<kAvx2FewNR>(t, w, begin, end, y, [&] { tile(kAvx2FewNR); });
        streamed_tiles(t, w, begin, end, nr_max, y, tile);
        return;
    }
    using T = Table2<true, false, kAvx2MR, kAvx2NR>;
    using First = Table2<true, true, kAvx2MR, kAvx2NR>;
    const std::int64_t kc = std::max<std::int64_t>(1, kAvx2L1Bytes / (kAvx2MR * kChunk * 4));
    blocked_tiles<kAvx2MR, kAvx2NR>(t, w, n, begin, end, kc, kAvx2L2Bytes, y,
                                    [&](std::int64_t s0, std::int64_t mr, std::int64_t nr) {
                                        t.x = x.f32.data() + s0 * x.stride;
                                        t.tail_cols = t.last && last_cols != kChunk ? last_cols : 0;
                                        (s0 == 0 ? First::get(mr, nr) : T::get(mr, nr))(t);
                                    });
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
// The tiles prefetch their weight rows into L2, not L1: L2 keeps more misses in flight than
// L1's fill buffers, and a decode tile streams 8 rows at once. On AMD Zen 4 (2 threads, n = 1
// over 512 MB of distinct 1024 × 1024 matrices, settings alternated in one process against
// the read loop beside each): 0.46-0.66 -> 0.56-0.83 of it (median of 11 rounds, four runs);
// mid-model decode 44-70 -> 69-73 tok/s (0.42-0.71 -> 0.49-0.83 of the read loop). On the GPU
// machine's Intel Xeon within the noise (kernels bench n = 1: 0.76-0.92 -> 0.79-1.13; the
// harness 0.85-0.94 -> 0.86-0.87).
constexpr _mm_hint kPrefetchHint = _MM_HINT_T1;
struct Tile : TileRange {
    const void* x;                // first activation row of the tile
    bool masked_last;             // chunk c1 - 1 is the row's partial last chunk
    __mmask32 tail;               // its columns
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
    if constexpr (MR == 1 && Full) {
        // One activation row (decode): each weight row's chunk loaded once, its odd words
        // kept in place by an AND and its even ones shifted up — the same two f32 vectors as
        // below, from one load instead of a masked and a plain one (at n = 1 the loads, not
        // the FMAs, are what this tile issues most). Each accumulator still takes its odd
        // product, then its even one.
        const __m512i upper = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
        const __m512 xo = _mm512_loadu_ps(x), xe = _mm512_loadu_ps(x + 16);
#pragma GCC unroll 8
        for (int o = 0; o < NR; ++o) {
            if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(pf + o * t.ws), kPrefetchHint);
            const __m512i raw = _mm512_loadu_si512(w + o * t.ws);
            acc[0][o] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(raw, upper)), xo, acc[0][o]);
            acc[0][o] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(raw, 16)), xe, acc[0][o]);
        }
        return;
    }
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int o = 0; o < NR; ++o) {
        if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(pf + o * t.ws), kPrefetchHint);
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
        if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(pf + o * t.ws), kPrefetchHint);
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
        if (t.last) t.y[s * t.ys + o * t.yo] = finish16(acc[s][o]);                            \
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
        t.masked_last = last_cols != kChunk;
        // The weight rows in a tile's NR parts where the prefetchers favour long streams
        // (bf16_decode_interleave_active): for a batched step's few rows too — the routed
        // experts of 2-8 sessions, most of its bytes. Mid model on AMD Zen 4, fast minutes,
        // 2 / 4 / 8 sessions: 1.17-1.19x / 1.63-1.65x / 2.06-2.08x one session ->
        // 1.34-1.46x / 1.70-1.72x / 2.14-2.18x.
        auto tile = [&](std::int64_t nr) {
            (n == 1 ? One::get(1, nr) : n <= kMR ? Few::get(n, nr) : Wide::get(n, nr))(t);
        };
        if (bf16_decode_interleave_active()) {
            if (n == 1) begin = interleaved_tiles<kGemvNR>(t, w, begin, end, y, [&] { tile(kGemvNR); });
            else if (n <= kMR) begin = interleaved_tiles<kNR>(t, w, begin, end, y, [&] { tile(kNR); });
            else begin = interleaved_tiles<kWideNR>(t, w, begin, end, y, [&] { tile(kWideNR); });
        }
        streamed_tiles(t, w, begin, end, nr_max, y, tile);
        return;
    }
    // The first activation tile over a block reads its weights from memory: prefetched as
    // above; the other tiles find them in L2.
    using T = Table<Dot, false, kMR, kNR>;
    using First = Table<Dot, true, kMR, kNR>;
    const std::int64_t kc = std::max<std::int64_t>(1, kL1Bytes / (kMR * kChunk * xbytes));
    blocked_tiles<kMR, kNR>(t, w, n, begin, end, kc, kL2Bytes, y, [&](std::int64_t s0, std::int64_t mr, std::int64_t nr) {
        t.x = xrow(s0);
        t.masked_last = t.last && last_cols != kChunk;
        (s0 == 0 ? First::get(mr, nr) : T::get(mr, nr))(t);
    });
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
    rows_avx2(w, x, begin, end, y);
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
