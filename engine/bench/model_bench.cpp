#include "engine/bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/bench/expert_cache_bench.h"
#include "engine/bench/layer_costs.h"
#include "engine/bench/memory_bandwidth.h"
#include "engine/bench/serve_bench.h"
#include "engine/cpu/int_kernels.h"
#include "engine/cpu/kernels.h"
#include "engine/forward/forward.h"
#include "engine/sampling/sampler.h"
#include "engine/vulkan/chain_stats.h"

namespace inkling::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What the expert cache's own warm-up (--warm-experts) read, and how long the benchmark
// waited for it.
struct CacheWarmUp {
    double seconds = 0;
    std::uint64_t warmed = 0;
};

// The first pass pages the weights in from the file; then the expert cache's warm-up is
// waited for: the figures are a running server's, not those of one whose reads are still
// arriving.
CacheWarmUp warm_up(forward::Forward& fw, const model::Config& c, const std::vector<std::int32_t>& prompt, int P) {
    {
        auto warm = forward::make_session(c, P + 1);
        fw.step(warm, prompt, nullptr, false);
    }
    CacheWarmUp w;
    if (auto* cache = fw.expert_cache()) {
        const auto w0 = Clock::now();
        cache->wait_warm();
        w.seconds = seconds_since(w0);
        w.warmed = cache->counters().warmed;
    }
    return w;
}

// One timed prefill and decode, and what was measured around them.
struct Timings {
    forward::PhaseTimes phases0, phases1, phases2;  // before the prefill, after it, after the decode
    double prefill_s = 0, decode_s = 0;
    int decoded = 0;
    std::uint64_t bytes_before = 0;  // weight bytes read before the decode
    double bandwidth_before = 0, bandwidth_after = 0, bandwidth = 0;
    experts::ExpertCache::Counters cache0;  // the cache's counters when the decode started
};

Timings prefill_and_decode(forward::Forward& fw, cpu::ThreadPool& pool, const model::Config& c,
                           const std::vector<std::int32_t>& prompt, int P, int N) {
    auto state = forward::make_session(c, P + N + 1);
    Timings t;
    t.phases0 = fw.phase_times();
    auto t0 = Clock::now();
    auto logits = fw.step(state, prompt, nullptr, false);
    t.prefill_s = seconds_since(t0);
    t.phases1 = fw.phase_times();
    t.bytes_before = fw.weight_bytes_read();
    auto* cache = fw.expert_cache();
    // The yardstick right before and right after the decode, divided by their mean: this
    // VM's read loop moves between two levels (29-37 and 48-61 GB/s on Zen 4) from one
    // minute to the next, and one measured before a long prefill could be of the other. One
    // probe for both (its buffer touched once), released before the sessions and reuse runs.
    std::optional<ReadBandwidth> probe(std::in_place, std::size_t{2} << 30, pool.size());
    t.bandwidth_before = probe->measure(5);
    t.cache0 = cache ? cache->counters() : experts::ExpertCache::Counters{};
    t0 = Clock::now();
    for (; t.decoded < N; ++t.decoded) {
        std::int32_t tok = sampling::argmax(logits);
        logits = fw.step(state, std::span(&tok, 1), nullptr, false);
    }
    t.decode_s = seconds_since(t0);
    t.bandwidth_after = probe->measure(5);
    probe.reset();
    t.bandwidth = (t.bandwidth_before + t.bandwidth_after) / 2;
    t.phases2 = fw.phase_times();
    return t;
}

// The Vulkan chain's figures over `steps` (frames a step; with --vk-profile, device time per
// kernel, most first).
nlohmann::json device_figures(const forward::Forward& fw, std::uint64_t steps) {
    nlohmann::json d = vulkan::device_stats(fw.chain(), steps);
    std::fprintf(stderr, "[bench] %s: %.1f device frames a step over %llu steps\n", fw.chain()->device().name.c_str(),
                 d["frames_per_step"].get<double>(), static_cast<unsigned long long>(d["steps"].get<std::uint64_t>()));
    if (const auto* prof = fw.chain()->profile()) {
        // Device time per kernel over the prefill and the decode steps, most first.
        std::vector<std::pair<std::string, std::pair<double, std::uint64_t>>> rows(prof->ns_and_count.begin(),
                                                                                     prof->ns_and_count.end());
        std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
        double total = 0;
        for (const auto& r : rows) total += r.second.first;
        for (const auto& [name, v] : rows) {
            d["profile"][name] = {{"ms", v.first / 1e6}, {"count", v.second}};
            std::fprintf(stderr, "[bench] device time: %-10s %8.2f ms (%4.1f%%) over %llu commands, %.2f us each\n",
                         name.c_str(), v.first / 1e6, 100.0 * v.first / std::max(total, 1.0),
                         static_cast<unsigned long long>(v.second), v.first / 1e3 / static_cast<double>(v.second));
        }
    }
    return d;
}

// Several sessions batched together (--sessions), each forward attached as `attach` says.
void session_figures(nlohmann::json& j, const model::Model& model, cpu::ThreadPool& pool, forward::Forward& fw,
                     const std::vector<int>& counts, int N, const std::function<void(forward::Forward&)>& attach,
                     const std::string& label) {
    fw.set_chain(nullptr);  // the device's memory to the sessions' forward
    j["sessions"] = bench_sessions(model, pool, counts, N, attach);
    for (const auto& row : j["sessions"])
        std::fprintf(stderr, "[bench] %s: %d sessions decode %.1f tok/s in all (%.2fx one session)\n", label.c_str(),
                     row["sessions"].get<int>(), row["aggregate_tok_s"].get<double>(),
                     row["ratio_to_first"].get<double>());
}

// Time to first token with the slot's state reused, and regenerating a conversation's last
// turn from its snapshot (--reuse-tokens).
void reuse_figures(nlohmann::json& j, const model::Model& model, cpu::ThreadPool& pool, int tokens) {
    j["reuse"] = bench_reuse(model, pool, tokens);
    std::fprintf(stderr, "[bench] %s: time to first token on a %d-token follow-up: %.0f ms reused vs %.0f ms cold (%.1fx)\n",
                 model.dir.filename().string().c_str(), j["reuse"]["conversation_tokens"].get<int>(),
                 j["reuse"]["ttft_ms_reused"].get<double>(), j["reuse"]["ttft_ms_cold"].get<double>(),
                 j["reuse"]["speedup"].get<double>());
    const auto& r = j["regenerate"] = bench_regenerate(model, pool, tokens);
    std::fprintf(stderr,
                 "[bench] %s: regenerating the last turn of a %d-token, %d-message conversation (CPU, %u threads): "
                 "time to first token %.1f ms from the last turn boundary's snapshot (%s tokens reused) vs %.1f ms "
                 "cold = %.3fx cold (goal <= 0.1x); first token %s\n",
                 model.dir.filename().string().c_str(), r["conversation_tokens"].get<int>(), r["messages"].get<int>(),
                 pool.size(), r["ttft_ms_reused"].get<double>(), r["reused_tokens"].get<std::string>().c_str(),
                 r["ttft_ms_cold"].get<double>(), r["ratio"].get<double>(),
                 r["same_first_token"].get<bool>() ? "equal" : "DIFFERENT");
}

}  // namespace

std::vector<int> parse_session_counts(const std::string& text) {
    std::vector<int> counts;
    std::stringstream ss(text);
    for (std::string n; std::getline(ss, n, ',');) counts.push_back(std::stoi(n));
    return counts;
}

void bench_model(const model::Model& model, cpu::ThreadPool& pool, forward::Forward& fw, const ModelBenchOptions& o,
                 const std::function<void(forward::Forward&)>& attach, std::ostream& out) {
    const auto& c = model.config;
    const int P = o.prompt_tokens, N = o.decode_tokens;
    const auto prompt = pseudo_prompt(c, P, 1);
    const CacheWarmUp warm = warm_up(fw, c, prompt, P);
    nlohmann::json j;
    const Timings t = prefill_and_decode(fw, pool, c, prompt, P, N);
    if (auto* cache = fw.expert_cache()) {
        j["expert_cache"] = expert_cache_figures(*cache, t.cache0, t.decoded, t.decode_s);
        j["expert_cache"]["warmed"] = warm.warmed;        // experts the warm-up read
        j["expert_cache"]["warm_wait_s"] = warm.seconds;  // waited for it after the first pass
    }
    if (fw.chain()) j["device"] = device_figures(fw, static_cast<std::uint64_t>(P + t.decoded));
    const double bytes_per_token = static_cast<double>(fw.weight_bytes_read() - t.bytes_before) / std::max(t.decoded, 1);
    const double decode_tps = t.decoded / t.decode_s;
    const double achieved = bytes_per_token * decode_tps / 1e9;
    j["model"] = model.dir.string();
    j["threads"] = pool.size();
    j["isa"] = cpu::isa_name(cpu::active_isa());
    j["numerics"] = cpu::numerics_name(cpu::active_numerics());
    j["weights_bytes"] = model.weights.matrix_bytes;
    j["weights_memory"] = model.tensors.copied() ? "copy" : "map";  // --load-weights, auto resolved
    j["lane_order"] = cpu::lane_order_active();                     // --lane-order, for this ISA
    j["memory_bandwidth_gb_s"] = t.bandwidth;
    j["memory_bandwidth_before_gb_s"] = t.bandwidth_before;
    j["memory_bandwidth_after_gb_s"] = t.bandwidth_after;
    j["prefill"] = {{"tokens", P},
                    {"seconds", t.prefill_s},
                    {"tok_s", P / t.prefill_s},
                    {"per_layer", layer_costs(c, t.phases0, t.phases1, P)}};
    j["decode"] = {{"tokens", t.decoded},
                   {"seconds", t.decode_s},
                   {"tok_s", decode_tps},
                   {"weight_bytes_per_token", bytes_per_token},
                   {"achieved_gb_s", achieved},
                   {"fraction_of_bandwidth", achieved / t.bandwidth},
                   {"per_layer", layer_costs(c, t.phases1, t.phases2, t.decoded)}};
    // The model's directory and the products' numerics: make bench runs the mid model both ways.
    const std::string label =
        model.dir.filename().string() + " (" + cpu::numerics_name(cpu::active_numerics()) + " numerics)";
    if (o.sessions) session_figures(j, model, pool, fw, *o.sessions, N, attach, label);
    if (o.reuse_tokens > 0) reuse_figures(j, model, pool, o.reuse_tokens);
    out << j.dump(2) << "\n";
    std::fprintf(stderr,
                 "[bench] %s: prefill %.1f tok/s; decode %.1f tok/s x %.1f MB/token = %.2f GB/s = %.0f%% of the "
                 "%.2f GB/s measured (%.2f before the decode, %.2f after)\n",
                 label.c_str(), P / t.prefill_s, decode_tps, bytes_per_token / 1e6, achieved,
                 100.0 * achieved / t.bandwidth, t.bandwidth, t.bandwidth_before, t.bandwidth_after);
}

}  // namespace inkling::bench
