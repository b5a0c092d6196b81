#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace inkling::sampling {

std::int32_t argmax(std::span<const float> values) {
    std::int32_t best = 0;
    for (std::size_t i = 1; i < values.size(); ++i)
        if (values[i] > values[best]) best = static_cast<std::int32_t>(i);
    return best;
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

    const float inv_t = static_cast<float>(1.0 / p_.temperature);
    order_.resize(work_.size());
    std::iota(order_.begin(), order_.end(), 0);
    // Highest logits first; stable so equal logits keep id order.
    std::stable_sort(order_.begin(), order_.end(), [&](std::int32_t a, std::int32_t b) { return work_[a] > work_[b]; });
    std::size_t keep = order_.size();
    if (p_.top_k > 0) keep = std::min<std::size_t>(keep, p_.top_k);
    std::vector<double> prob(keep);
    const double mx = work_[order_[0]] * inv_t;
    double total = 0.0;
    for (std::size_t i = 0; i < keep; ++i) total += (prob[i] = std::exp(work_[order_[i]] * inv_t - mx));
    if (p_.top_p < 1.0) {
        // Smallest prefix whose probability reaches top_p (at least one token).
        double acc = 0.0;
        std::size_t cut = keep;
        for (std::size_t i = 0; i < keep; ++i) {
            acc += prob[i] / total;
            if (acc >= p_.top_p) {
                cut = i + 1;
                break;
            }
        }
        keep = cut;
        total = std::accumulate(prob.begin(), prob.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
    }
    // A uniform double in [0, 1) from 53 random bits: the same on every platform.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
    double acc = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        acc += prob[i];
        if (u < acc) return order_[i];
    }
    return order_[keep - 1];
}

}  // namespace inkling::sampling
