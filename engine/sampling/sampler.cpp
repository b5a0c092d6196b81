#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace inkling::sampling {

std::int32_t argmax(std::span<const float> values) {
    // The first index of the largest value, NaNs never winning a comparison (and a NaN
    // first value never losing one: index 0 then). Two passes, the first over 16
    // independent lanes that the compiler vectorizes: a greedy decode step scans the whole
    // vocabulary, which one compare-and-branch a value made ~1 % of a mid-model token.
    const std::size_t n = values.size();
    const float* v = values.data();
    if (n == 0 || std::isnan(v[0])) return 0;
    constexpr std::size_t kLanes = 16;
    float lane[kLanes];
    std::fill(lane, lane + kLanes, v[0]);
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::size_t l = 0; l < kLanes; ++l) lane[l] = v[i + l] > lane[l] ? v[i + l] : lane[l];
    float best = v[0];
    for (float x : lane) best = x > best ? x : best;
    for (; i < n; ++i) best = v[i] > best ? v[i] : best;
    std::size_t at = 0;
    while (!(v[at] == best)) ++at;
    return static_cast<std::int32_t>(at);
}

double log_sum_exp(std::span<const float> values) {
    const double mx = *std::max_element(values.begin(), values.end());
    double total = 0.0;
    for (float v : values) total += std::exp(static_cast<double>(v) - mx);
    return mx + std::log(total);
}

Sampler::Sampler(const Params& params) : p_(params), rng_(params.seed) {}

std::int32_t Sampler::next(std::span<const float> logits, std::span<const std::int32_t> history) {
    work_.assign(logits.begin(), logits.end());
    if (p_.repetition_penalty != 1.0) {
        const float pen = static_cast<float>(p_.repetition_penalty);
        for (std::int32_t id : history) {
            if (id < 0 || static_cast<std::size_t>(id) >= work_.size()) continue;
            // From the original logit, so an id seen several times is penalised once.
            float original = logits[static_cast<std::size_t>(id)];
            work_[id] = original > 0 ? original / pen : original * pen;
        }
    }
    if (p_.temperature <= 0.0) return argmax(work_);

    const std::size_t V = work_.size();
    const double inv_t = 1.0 / p_.temperature;
    const float mx = *std::max_element(work_.begin(), work_.end());
    prob_.resize(V);
    double total = 0.0;
    for (std::size_t i = 0; i < V; ++i) total += (prob_[i] = std::exp((work_[i] - mx) * inv_t));
    // A uniform double in [0, 1) from 53 random bits: the same on every platform.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;

    if (p_.top_k == 0 && p_.top_p >= 1.0) {  // the whole distribution, in id order
        double acc = 0.0, target = u * total;
        for (std::size_t i = 0; i < V; ++i)
            if ((acc += prob_[i]) > target) return static_cast<std::int32_t>(i);
        return argmax(work_);
    }
    // Most probable first (ties: lower id first). Only as much of the order as the cuts
    // need is sorted: top-k entries, or growing blocks until the top-p mass is reached.
    order_.resize(V);
    std::iota(order_.begin(), order_.end(), 0);
    auto before = [&](std::int32_t a, std::int32_t b) { return prob_[a] > prob_[b] || (prob_[a] == prob_[b] && a < b); };
    std::size_t keep = p_.top_k > 0 ? std::min<std::size_t>(p_.top_k, V) : V;
    if (keep < V) {
        std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep), order_.end(), before);
        total = 0.0;
        for (std::size_t i = 0; i < keep; ++i) total += prob_[order_[i]];
    }
    if (p_.top_p < 1.0) {
        // The smallest prefix whose mass reaches top_p of what is kept (at least one).
        std::size_t sorted = keep < V ? keep : 0, block = 64;
        double acc = 0.0;
        std::size_t cut = keep;
        for (std::size_t i = 0; i < keep; ++i) {
            if (i == sorted) {
                std::size_t upto = std::min(keep, sorted + block);
                std::partial_sort(order_.begin() + static_cast<std::ptrdiff_t>(sorted),
                                  order_.begin() + static_cast<std::ptrdiff_t>(upto),
                                  order_.begin() + static_cast<std::ptrdiff_t>(keep), before);
                sorted = upto;
                block *= 16;
            }
            acc += prob_[order_[i]];
            if (acc >= p_.top_p * total) {
                cut = i + 1;
                break;
            }
        }
        keep = cut;
        total = acc;
    }
    double acc = 0.0, target = u * total;
    for (std::size_t i = 0; i < keep; ++i)
        if ((acc += prob_[order_[i]]) > target) return order_[i];
    return order_[keep - 1];
}

}  // namespace inkling::sampling
