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

// One query (row, head) at position p over positions t0 … t0+n−1 (all ≤ p), given as runs
// of consecutive keys and values in position order. Without `stats` out[hd] is the
// normalised output; with it the softmax is left open: out gets Σ e_t·v_t, stats[0] the
// max score and stats[1] Σ e_t. Each run's dot products and weighted sum go to the kernels
// in one call (a call a position cost more than the arithmetic at short contexts); each
// element keeps the order of a position-by-position loop.
void attend_head(const model::Config& c, int layer, const float* bank, const float* q, const float* r, std::int64_t p,
                 std::int64_t t0, std::int64_t n, HeadScratch& s, float* out, float* stats) {
    const std::int64_t hd = c.layer_head_dim(layer), ext = c.layer_extent(layer), d_rel = c.d_rel;
    const float inv_hd = 1.0f / static_cast<float>(hd);
    const float tau = attention_tau(c, layer, p);
    // This head's bias for each backward distance it sees, from the nearest (dmin) on,
    // zero past the bank: Σ_d r[d]·bank[d][e], d in order.
    const std::int64_t dmin = p - (t0 + n - 1);
    const std::int64_t nb = std::clamp<std::int64_t>(std::min(ext, p - t0 + 1) - dmin, 0, n);
    s.bias.assign(static_cast<std::size_t>(nb), 0.0f);
    if (nb > 0) cpu::axpys(r, bank + dmin, ext, d_rel, nb, s.bias.data());
    s.scores.resize(static_cast<std::size_t>(n));
    std::int64_t at = 0;
    for (const KvRun& run : s.runs) {
        cpu::dots(q, run.k, run.stride, run.n, hd, s.scores.data() + at);
        at += run.n;
    }
    float mx = -std::numeric_limits<float>::infinity();
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t dist = p - (t0 + i);
        const float bias = dist < ext ? s.bias[dist - dmin] : 0.0f;
        const float sc = attention_score(s.scores[i], inv_hd, bias, tau);
        s.scores[i] = sc;
        mx = std::max(mx, sc);
    }
    cpu::softmax_numerators(s.scores.data(), n, mx);
    float total = 0.0f;
    for (float sc : s.scores) total += sc;
    if (!stats)
        for (auto& sc : s.scores) sc = sc / total;
    std::fill(out, out + hd, 0.0f);
    at = 0;
    for (const KvRun& run : s.runs) {
        cpu::axpys(s.scores.data() + at, run.v, run.stride, run.n, hd, out);
        at += run.n;
    }
    if (stats) stats[0] = mx, stats[1] = total;
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
    run_jobs(pool, R * H, work, [&](std::int64_t begin, std::int64_t end) {
        HeadScratch s;
        for (std::int64_t job = begin; job < end; ++job) {
            const std::int64_t row = job / H, hh = job % H, g = hh / group;
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
            attend_head(c, layer, a.bank, a.q + (row * H + hh) * hd, a.r + (row * H + hh) * c.d_rel, p, t0, p - t0 + 1,
                        s, out + (row * H + hh) * hd, nullptr);
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
            attend_head(c, layer, a.bank, a.q + (row * H + hh) * hd, a.r + (row * H + hh) * c.d_rel,
                        sp.pos0 + (row - sp.first), 0, lo, s, o + 2, o);
        }
    });
}

}  // namespace inkling::forward
