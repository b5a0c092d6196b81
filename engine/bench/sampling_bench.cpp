#include "engine/bench/sampling_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"

namespace inkling::bench {
namespace {

struct Setting {
    const char* name;
    sampling::Params params;
};

// Median ms of one draw over `rounds` rounds of `draws` draws each.
double ms_per_draw(const sampling::Params& params, const std::vector<float>& logits, int draws, int rounds) {
    sampling::Sampler sampler(params);
    std::vector<double> ms;
    volatile std::int32_t sink = 0;
    for (int r = 0; r < rounds; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < draws; ++i) sink = sampler.next(logits, {});
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / draws);
    }
    (void)sink;
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

nlohmann::json bench_sampling(std::size_t vocab) {
    std::mt19937 gen(7);
    // Flat: normal logits of spread 2 (top-p 0.95 keeps tens of thousands of ids). Peaked:
    // log-probabilities falling as −1.1 · ln(rank) with noise, ranks shuffled over the ids
    // (a few ids hold most of the mass, as after a fluent prefix).
    std::vector<float> flat(vocab), peaked(vocab);
    std::normal_distribution<float> noise(0.0f, 2.0f);
    for (auto& x : flat) x = noise(gen);
    std::vector<std::size_t> rank(vocab);
    for (std::size_t i = 0; i < vocab; ++i) rank[i] = i + 1;
    std::shuffle(rank.begin(), rank.end(), gen);
    std::normal_distribution<float> small(0.0f, 0.3f);
    for (std::size_t i = 0; i < vocab; ++i) peaked[i] = -1.1f * std::log(static_cast<float>(rank[i])) + small(gen);

    const Setting settings[] = {
        {"greedy", {}},
        {"temperature 1", {.temperature = 1.0, .seed = 1}},
        {"temperature 0.8, top-p 0.95", {.temperature = 0.8, .top_p = 0.95, .seed = 1}},
        {"temperature 0.7, top-k 40", {.temperature = 0.7, .top_k = 40, .seed = 1}},
        {"temperature 0.8, top-k 40, top-p 0.95", {.temperature = 0.8, .top_p = 0.95, .top_k = 40, .seed = 1}},
    };
    nlohmann::json out = {{"vocab", vocab}, {"settings", nlohmann::json::array()}};
    std::fprintf(stderr, "[bench] sampling one token from %zu logits (ms, and x the greedy pick's time)\n", vocab);
    std::fprintf(stderr, "[bench] %-40s %22s %22s\n", "setting", "flat row", "peaked row");
    double greedy[2] = {0, 0};
    for (const Setting& s : settings) {
        double ms[2];
        int k = 0;
        for (const auto* row : {&flat, &peaked}) ms[k++] = ms_per_draw(s.params, *row, 20, 7);
        if (s.params.temperature <= 0.0) std::copy(ms, ms + 2, greedy);
        std::fprintf(stderr, "[bench] %-40s %9.3f ms (%6.1fx) %9.3f ms (%6.1fx)\n", s.name, ms[0], ms[0] / greedy[0], ms[1],
                     ms[1] / greedy[1]);
        out["settings"].push_back({{"setting", s.name}, {"flat_ms", ms[0]}, {"peaked_ms", ms[1]},
                                   {"flat_x_greedy", ms[0] / greedy[0]}, {"peaked_x_greedy", ms[1] / greedy[1]}});
    }
    return out;
}

}  // namespace inkling::bench
