#include "engine/forward/host_experts.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "engine/cpu/activations.h"
#include "engine/cpu/thread_scratch.h"
#include "engine/forward/gate_up.h"

namespace inkling::forward {
namespace {

// The top `k` experts of one row by sigmoid + correction bias (ties to the lowest id).
void select_experts(const float* lg, const std::vector<float>& bias, std::int64_t E, std::int64_t K,
                    std::vector<float>& choice, std::vector<char>& taken, std::vector<std::int64_t>& chosen) {
    for (std::int64_t e = 0; e < E; ++e) choice[e] = cpu::sigmoid(lg[e]) + bias[e];
    std::fill(taken.begin(), taken.end(), 0);
    chosen.clear();
    for (std::int64_t kk = 0; kk < K; ++kk) {
        std::int64_t best = -1;
        for (std::int64_t e = 0; e < E; ++e)
            if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
        taken[best] = 1;
        chosen.push_back(best);
    }
}

}  // namespace

HostExperts::HostExperts(const model::Model& model, Meter& meter, std::shared_ptr<experts::ExpertCache> cache)
    : c_(model.config), w_(model.weights), meter_(meter), cache_(std::move(cache)) {
    for (int i = 0; i < c_.layers; ++i)
        uses_.emplace_back(c_.kinds[i].sparse ? static_cast<std::size_t>(c_.experts) : 0, 0);
    if (model.experts && !cache_) {
        experts::CacheOptions o;
        o.cap = experts::default_cap(*model.experts, experts::dense_bytes_to_count(model));
        cache_ = std::make_shared<experts::ExpertCache>(model.experts, o);
    }
    if (cache_ && !model.experts) throw std::logic_error("an expert cache for a model without experts.inkx");
}

Routing HostExperts::route(int layer, std::int64_t S, const float* logits, const float* h) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t E = c_.experts, NS = c_.shared_experts, K = c_.top_k;
    auto t = Meter::Clock::now();
    // Selection by sigmoid + correction bias (ties to the lowest id); combine weights are
    // plain sigmoids normalised together with the shared experts' own.
    Routing r;
    r.by_expert.resize(static_cast<std::size_t>(E));
    r.shared_w.resize(static_cast<std::size_t>(S * NS));
    std::vector<float> choice(static_cast<std::size_t>(E));
    std::vector<char> taken(static_cast<std::size_t>(E));
    std::vector<std::int64_t> chosen;
    for (std::int64_t s = 0; s < S; ++s) {
        const float* lg = logits + s * (E + NS);
        select_experts(lg, L.router_bias, E, K, choice, taken, chosen);
        float z = 0.0f;
        for (auto e : chosen) z += cpu::sigmoid(lg[e]);
        for (std::int64_t j = 0; j < NS; ++j) z += cpu::sigmoid(lg[E + j]);
        // 1 / z as moe_route.comp takes it on the device (no division: a GPU's `/` rounds
        // as its driver likes), so the combine weights are the same bits on both.
        const float scale = static_cast<float>(c_.route_scale) * L.router_scale * cpu::reciprocal(z);
        for (auto e : chosen) r.by_expert[e].emplace_back(s, cpu::sigmoid(lg[e]) * scale);
        for (std::int64_t j = 0; j < NS; ++j) r.shared_w[s * NS + j] = cpu::sigmoid(lg[E + j]) * scale;
    }
    for (std::int64_t e = 0; e < E; ++e) {
        const auto n = r.by_expert[e].size();
        uses_[layer][e] += n;
        if (n == 0) continue;
        r.used.push_back(static_cast<int>(e));
        if (cache_) cache_->record_use(layer, static_cast<int>(e), n);
    }
    if (cache_) prefetch_after(layer, S, h);
    Meter::lap(t, meter_.times().router);
    return r;
}

template <class Round>
void HostExperts::rounds(int layer, std::span<const int> ids, Meter::Clock::time_point& t, Round&& round) {
    const model::LayerWeights& L = w_.layers[layer];
    auto& times = meter_.times();
    if (!cache_) {
        std::vector<const model::Ffn*> f;
        for (int e : ids) f.push_back(&L.experts[e]);
        if (!ids.empty()) round(ids, f);
        return;
    }
    // Rounds of at most `cap` experts: acquire (reading the misses), compute, release.
    for (std::size_t at = 0; at < ids.size();) {
        const std::span<const int> rest = ids.subspan(at);
        const std::size_t n = cache_->round_size(layer, rest);
        Meter::lap(t, times.experts);
        auto lease = cache_->acquire(layer, rest.first(n));
        Meter::lap(t, times.expert_io);
        std::vector<const model::Ffn*> f;
        for (const auto& ffn : lease.ffn()) f.push_back(&ffn);
        round(rest.first(n), f);
        at += n;
    }
}

void HostExperts::record(int layer, std::span<const std::uint32_t> experts) {
    std::vector<std::uint64_t> rows(static_cast<std::size_t>(c_.experts), 0);
    for (std::uint32_t e : experts)
        if (e < rows.size()) ++rows[e];
    for (std::size_t e = 0; e < rows.size(); ++e) {
        if (rows[e] == 0) continue;
        uses_[layer][e] += rows[e];
        if (cache_) cache_->record_use(layer, static_cast<int>(e), rows[e]);
    }
}

void HostExperts::run(int layer, const Routing& routing, std::int64_t S, const float* h, float* out, bool shared,
                      std::span<const model::Matrix* const> then) {
    const std::int64_t D = c_.hidden, NS = c_.shared_experts;
    auto& times = meter_.times();
    auto t = Meter::Clock::now();
    // Routed contributions in increasing expert id (each row's sum has the same order
    // however rows are batched, and however many rounds the cache needs); the shared
    // experts summed on their own, then added.
    std::fill(out, out + S * D, 0.0f);
    float* shared_y = shared && NS > 0 ? cpu::at_least(shared_y_, static_cast<std::size_t>(NS * S * D)) : nullptr;
    bool first = true;
    rounds(layer, routing.used, t, [&](std::span<const int> ids, const std::vector<const model::Ffn*>& f) {
        round(layer, ids, f, routing, S, h, out, first ? shared_y : nullptr, then);
        first = false;
    });
    // No routed expert used (never with top-k ≥ 1, but the shared ones still count).
    if (first && shared_y) round(layer, {}, {}, routing, S, h, out, shared_y, then);
    if (shared_y) {
        float* shared_sum = cpu::at_least(shared_sum_, static_cast<std::size_t>(S * D));
        std::fill(shared_sum, shared_sum + S * D, 0.0f);
        for (std::int64_t j = 0; j < NS; ++j) {
            const float* y = shared_y + j * S * D;
            for (std::int64_t s = 0; s < S; ++s)
                for (std::int64_t d = 0; d < D; ++d)
                    shared_sum[s * D + d] += routing.shared_w[s * NS + j] * y[s * D + d];
        }
        for (std::int64_t i = 0; i < S * D; ++i) out[i] += shared_sum[i];
    }
    Meter::lap(t, times.experts);
}

void HostExperts::run_pairs(int layer, const Routing& routing, std::span<const int> experts, std::int64_t S,
                            const float* h, const std::vector<std::vector<std::int64_t>>& pair_of, float* y) {
    auto t = Meter::Clock::now();
    rounds(layer, experts, t, [&](std::span<const int> ids, const std::vector<const model::Ffn*>& f) {
        round(layer, ids, f, routing, S, h, y, nullptr, {}, &pair_of);
    });
    Meter::lap(t, meter_.times().experts);
}

void HostExperts::visit(int layer, std::span<const int> experts, const Visit& fn) {
    auto t = Meter::Clock::now();
    rounds(layer, experts, t, fn);
    Meter::lap(t, meter_.times().experts);
}

void HostExperts::round(int layer, std::span<const int> ids, const std::vector<const model::Ffn*>& f,
                        const Routing& routing, std::int64_t S, const float* h, float* out,
                        float* shared_y, std::span<const model::Matrix* const> then,
                        const std::vector<std::vector<std::int64_t>>* pair_of) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t D = c_.hidden, NS = c_.shared_experts;
    // Every expert of the round — the routed ones over the rows routed to them, the
    // shared ones over all rows — in two grouped passes (gate+up, then down), so each
    // expert's weights are read once and the threads are handed work twice.
    struct Run {
        const model::Ffn* f;
        std::int64_t rows;
        const float* x;
        float* gate_up;
        float* y;
    };
    // The round's gathered inputs, gate/up products and outputs in one buffer kept across
    // rounds (the shared experts' outputs in shared_y).
    std::size_t floats = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto rows = static_cast<std::int64_t>(routing.by_expert[ids[i]].size());
        floats += static_cast<std::size_t>((rows == S ? 0 : rows * D) + gate_up_floats(*f[i], rows) + rows * D);
    }
    if (shared_y)
        for (std::int64_t j = 0; j < NS; ++j) floats += static_cast<std::size_t>(gate_up_floats(L.shared[j], S));
    float* free = cpu::at_least(arena_, floats);
    auto take = [&free](std::int64_t n) { return std::exchange(free, free + n); };
    std::vector<Run> runs;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto& rows = routing.by_expert[ids[i]];
        Run r{f[i], static_cast<std::int64_t>(rows.size()), h, nullptr, nullptr};
        // Every row (rows are listed in order: a decode step of one session, say): `h`
        // itself, so the group quantizes or packs it once for all such experts.
        if (r.rows != S) {
            float* xs = take(r.rows * D);
            for (std::int64_t n = 0; n < r.rows; ++n) std::copy_n(h + rows[n].first * D, D, xs + n * D);
            r.x = xs;
        }
        r.gate_up = take(gate_up_floats(*r.f, r.rows));
        r.y = take(r.rows * D);
        runs.push_back(r);
    }
    if (shared_y)
        for (std::int64_t j = 0; j < NS; ++j)
            runs.push_back({&L.shared[j], S, h, take(gate_up_floats(L.shared[j], S)), shared_y + j * S * D});
    std::vector<cpu::MatJob> jobs;
    std::vector<const model::Matrix*> downs;
    for (auto& r : runs) {
        add_gate_up_jobs(*r.f, r.x, r.rows, r.gate_up, jobs);
        downs.push_back(&r.f->down);
    }
    // The downs are warmed while SwiGLU runs; after the downs, `then` (or nothing: these
    // experts' weights may be released after the round).
    meter_.mm_group(jobs, downs);
    jobs.clear();
    for (auto& r : runs) {
        swiglu_in_place(*r.f, r.rows, r.gate_up);
        jobs.push_back({r.gate_up, r.rows, &r.f->down, r.y});
    }
    meter_.mm_group(jobs, then);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto& rows = routing.by_expert[ids[i]];
        const Run& r = runs[i];
        for (std::int64_t n = 0; n < r.rows; ++n) {
            if (pair_of) {
                std::copy_n(r.y + n * D, D, out + (*pair_of)[ids[i]][n] * D);
                continue;
            }
            float* o = out + rows[n].first * D;
            const float wgt = rows[n].second;
            for (std::int64_t d = 0; d < D; ++d) o[d] += wgt * r.y[n * D + d];
        }
    }
}

void HostExperts::prefetch_after(int layer, std::int64_t S, const float* h) {
    if (!cache_->prefetch_enabled()) return;
    int next = layer + 1;
    while (next < c_.layers && !c_.kinds[next].sparse) ++next;
    if (next >= c_.layers) return;
    // The next sparse layer's router applied to this layer's MoE input: its input will be
    // this plus one more layer's update, close enough to guess which experts it picks.
    const model::LayerWeights& N = w_.layers[next];
    const std::int64_t E = c_.experts, NS = c_.shared_experts, K = c_.top_k;
    std::vector<float> logits(static_cast<std::size_t>(S * (E + NS)));
    meter_.mm(h, S, N.router, logits.data());
    std::vector<float> choice(static_cast<std::size_t>(E));
    std::vector<char> taken(static_cast<std::size_t>(E)), wanted(static_cast<std::size_t>(E), 0);
    std::vector<std::int64_t> chosen;
    for (std::int64_t s = 0; s < S; ++s) {
        select_experts(logits.data() + s * (E + NS), N.router_bias, E, K, choice, taken, chosen);
        for (auto e : chosen) wanted[e] = 1;
    }
    // Lowest ids first: the next layer's first round takes those.
    std::vector<int> ids;
    for (std::int64_t e = 0; e < E; ++e)
        if (wanted[e]) ids.push_back(static_cast<int>(e));
    cache_->prefetch(next, ids);
}

}  // namespace inkling::forward
