#include "engine/forward/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cpu/activations.h"
#include "engine/cpu/kernels.h"
#include "engine/forward/attention_math.h"

namespace inkling::forward {
namespace {

// Positions in order, `n` of them from k/v, position i at k + i·stride (and v + i·stride).
struct KvRun {
    const float* k;
    const float* v;
    std::int64_t stride, n;
};

// Buffers one thread reuses from head to head.
struct HeadScratch {
    std::vector<float> scores, bias;
    std::vector<KvRun> runs;
};

// The scalar loops over a head's positions in kLanes independent lanes (element i in lane
// i % kLanes), so the compiler can keep them in vector registers with no reassociation of its
// own (scalar, with the sum one serial chain of n additions, they were a fifth of the heads'
// time in a 2,048-token prefill, perf; the file is built at -O3 for them). The sum's order
// — each lane in position order, then the lanes pairwise — is the softmax's denominator on
// every ISA and platform alike.
constexpr std::int64_t kLanes = 8;

float lane_max(const float* v, std::int64_t n) {
    float m[kLanes];
    std::fill(m, m + kLanes, -std::numeric_limits<float>::infinity());
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::int64_t l = 0; l < kLanes; ++l) m[l] = std::max(m[l], v[i + l]);
    for (std::int64_t l = 0; i < n; ++i, ++l) m[l] = std::max(m[l], v[i]);
    for (std::int64_t l = 1; l < kLanes; ++l) m[0] = std::max(m[0], m[l]);
    return m[0];
}

float lane_sum(const float* v, std::int64_t n) {
    float a[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::int64_t l = 0; l < kLanes; ++l) a[l] += v[i + l];
    for (std::int64_t l = 0; i < n; ++i, ++l) a[l] += v[i];
    for (std::int64_t w = kLanes / 2; w > 0; w /= 2)
        for (std::int64_t l = 0; l < w; ++l) a[l] += a[l + w];
    return a[0];
}

// Keys (or values) a tile holds while every head of a group passes over it (16 KB: it stays
// in L1 between the heads).
constexpr std::int64_t kTileBytes = 16 << 10;

// Queries of `heads` consecutive heads sharing one KV head (row fixed) at position p over
// positions t0 … t0+n−1 (all ≤ p), given as runs of consecutive keys and values in position
// order; head h's query, relative projection and output at q + h·hd, r + h·d_rel and
// out + h·stride. Without `stats` out[hd] is the normalised output; with it the softmax is
// left open: out gets Σ e_t·v_t, stats[h·stride] the max score and the next float Σ e_t.
// The keys and values are read once for all the heads, a tile at a time; each head's dot
// products and weighted sums are the kernels' (dots, axpys) over the same positions in the
// same order, so a head gives the same bits in any group (a call a run per head cost more
// than the arithmetic at short contexts, so a lone head takes each run in one call).
void attend_heads(const model::Config& c, int layer, const float* bank, const float* q, const float* r,
                  std::int64_t heads, std::int64_t p, std::int64_t t0, std::int64_t n, HeadScratch& s, float* out,
                  float* stats, std::int64_t stride) {
    const std::int64_t hd = c.layer_head_dim(layer), ext = c.layer_extent(layer), d_rel = c.d_rel;
    const float inv_hd = 1.0f / static_cast<float>(hd);
    const float tau = attention_tau(c, layer, p);
    const std::int64_t tile = heads == 1 ? n : std::max<std::int64_t>(8, kTileBytes / (hd * 4));
    // Each head's bias for each backward distance it sees, from the nearest (dmin) on, zero
    // past the bank: Σ_d r[d]·bank[d][e], d in order.
    const std::int64_t dmin = p - (t0 + n - 1);
    const std::int64_t nb = std::clamp<std::int64_t>(std::min(ext, p - t0 + 1) - dmin, 0, n);
    s.bias.assign(static_cast<std::size_t>(heads * nb), 0.0f);
    if (nb > 0)
        for (std::int64_t h = 0; h < heads; ++h) cpu::axpys(r + h * d_rel, bank + dmin, ext, d_rel, nb, s.bias.data() + h * nb);
    s.scores.resize(static_cast<std::size_t>(heads * n));
    std::int64_t at = 0;
    for (const KvRun& run : s.runs) {
        for (std::int64_t i = 0; i < run.n; i += tile) {
            const std::int64_t m = std::min(tile, run.n - i);
            for (std::int64_t h = 0; h < heads; ++h)
                cpu::dots(q + h * hd, run.k + i * run.stride, run.stride, m, hd, s.scores.data() + h * n + at + i);
        }
        at += run.n;
    }
    // Positions before `near` are past the bank (no bias); position i ≥ near is n − 1 − i
    // from the nearest, its bias bh[n − 1 − i].
    const std::int64_t near = n - nb;
    for (std::int64_t h = 0; h < heads; ++h) {
        float* sh = s.scores.data() + h * n;
        const float* bh = s.bias.data() + h * nb;
        for (std::int64_t i = 0; i < near; ++i) sh[i] = attention_score(sh[i], inv_hd, 0.0f, tau);
        for (std::int64_t i = near; i < n; ++i) sh[i] = attention_score(sh[i], inv_hd, bh[n - 1 - i], tau);
        const float mx = lane_max(sh, n);
        cpu::softmax_numerators(sh, n, mx);
        const float total = lane_sum(sh, n);
        if (stats) stats[h * stride] = mx, stats[h * stride + 1] = total;
        else
            for (std::int64_t i = 0; i < n; ++i) sh[i] = sh[i] / total;
        std::fill(out + h * stride, out + h * stride + hd, 0.0f);
    }
    at = 0;
    for (const KvRun& run : s.runs) {
        for (std::int64_t i = 0; i < run.n; i += tile) {
            const std::int64_t m = std::min(tile, run.n - i);
            for (std::int64_t h = 0; h < heads; ++h)
                cpu::axpys(s.scores.data() + h * n + at + i, run.v + i * run.stride, run.stride, m, hd, out + h * stride);
        }
        at += run.n;
    }
}

// Positions [from, to) of a session's cache for KV head g ([kv_heads][rows][hd], t at row
// t % rows) as runs of consecutive rows: two where the ring wraps.
void add_cache_runs(const LayerState& st, std::int64_t g, std::int64_t from, std::int64_t to,
                    std::vector<KvRun>& runs) {
    while (from < to) {
        const std::int64_t row = from % st.rows, len = std::min(to - from, st.rows - row);
        const std::int64_t off = (g * st.rows + row) * st.head_dim;
        runs.push_back({st.k.data() + off, st.v.data() + off, st.head_dim, len});
        from += len;
    }
}

// Runs job(begin, end) over `jobs` (row, head) pairs, on the pool when `work` (scores to
// compute, ~25 ns each) is worth the hand-off (~1 µs to a polling worker): a decode step's
// 16 heads over 100 positions already are.
template <class Job>
void run_jobs(cpu::ThreadPool* pool, std::int64_t jobs, std::int64_t work, Job job) {
    if (pool && work >= 512) pool->parallel_for(jobs, job);
    else job(0, jobs);
}

}  // namespace

void attend(const AttentionView& a, std::int64_t R, cpu::ThreadPool* pool, float* out) {
    const model::Config& c = a.config;
    const int layer = a.layer;
    const bool local = c.kinds[layer].local;
    const std::int64_t H = c.layer_heads(layer), KV = c.layer_kv_heads(layer), hd = c.layer_head_dim(layer);
    const std::int64_t group = H / KV;
    std::vector<std::int32_t> span_of(static_cast<std::size_t>(R));
    std::int64_t work = 0;
    for (std::size_t b = 0; b < a.spans.size(); ++b) {
        const Span& sp = a.spans[b];
        for (std::int64_t s = 0; s < sp.rows; ++s) span_of[sp.first + s] = static_cast<std::int32_t>(b);
        work += sp.rows * H * (sp.pos0 + sp.rows);
    }
    // A job takes a row's heads that share a KV head, so their keys and values are read once,
    // halving the group while that leaves fewer jobs than threads (a decode step on many
    // cores: Inkling-Small's 8 KV heads against 16 threads).
    std::int64_t per = group;
    const std::int64_t ways = pool ? pool->size() : 1;
    while (per % 2 == 0 && R * (H / per) < ways) per /= 2;
    const std::int64_t jobs_per_row = H / per;
    // Rows in the order 0, R−1, 1, R−2, …: a prompt chunk's later rows see more positions
    // (all of them on a global layer), and the pool gives each thread a contiguous range of
    // jobs — in row order the last thread had 3× the first's work at 2 threads.
    auto row_of = [R](std::int64_t k) { return k % 2 == 0 ? k / 2 : R - 1 - k / 2; };
    run_jobs(pool, R * jobs_per_row, work, [&](std::int64_t begin, std::int64_t end) {
        HeadScratch s;
        for (std::int64_t job = begin; job < end; ++job) {
            const std::int64_t row = row_of(job / jobs_per_row), hh = job % jobs_per_row * per, g = hh / group;
            const Span& sp = a.spans[span_of[row]];
            const LayerState& st = sp.state->layers[layer];
            const std::int64_t p = sp.pos0 + (row - sp.first);
            const std::int64_t t0 = local ? std::max<std::int64_t>(0, p - c.window + 1) : 0;
            // Older positions from the cache, this block's from its fresh rows.
            s.runs.clear();
            add_cache_runs(st, g, t0, std::min(p + 1, sp.pos0), s.runs);
            const std::int64_t fresh = std::max(t0, sp.pos0);
            const std::int64_t off = ((sp.first + fresh - sp.pos0) * KV + g) * hd;
            if (fresh <= p) s.runs.push_back({a.k + off, a.v + off, KV * hd, p - fresh + 1});
            attend_heads(c, layer, a.bank, a.q + (row * H + hh) * hd, a.r + (row * H + hh) * c.d_rel, per, p, t0,
                         p - t0 + 1, s, out + (row * H + hh) * hd, nullptr, hd);
        }
    });
}

void attend_stats(const AttentionView& a, std::size_t span, std::int64_t lo, cpu::ThreadPool* pool, float* out) {
    const model::Config& c = a.config;
    const int layer = a.layer;
    const Span& sp = a.spans[span];
    const LayerState& st = sp.state->layers[layer];
    const std::int64_t H = c.layer_heads(layer), KV = c.layer_kv_heads(layer), hd = c.layer_head_dim(layer);
    const std::int64_t group = H / KV;
    run_jobs(pool, sp.rows * H, sp.rows * H * lo, [&](std::int64_t begin, std::int64_t end) {
        HeadScratch s;
        for (std::int64_t job = begin; job < end; ++job) {
            const std::int64_t row = sp.first + job / H, hh = job % H, g = hh / group;
            s.runs.clear();
            add_cache_runs(st, g, 0, lo, s.runs);
            float* o = out + (row * H + hh) * (hd + 2);
            attend_heads(c, layer, a.bank, a.q + (row * H + hh) * hd, a.r + (row * H + hh) * c.d_rel, 1,
                         sp.pos0 + (row - sp.first), 0, lo, s, o + 2, o, hd + 2);
        }
    });
}

}  // namespace inkling::forward
