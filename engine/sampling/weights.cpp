#include "engine/sampling/weights.h"

#include "engine/cpu/exp_core.h"

namespace inkling::sampling {
using cpu::exp_nonpositive_core;

float exp_nonpositive(float x) { return exp_nonpositive_core(x); }

void softmax_weights(std::span<const float> logits, float mx, float inv_t, std::span<float> out) {
    const float* l = logits.data();
    float* o = out.data();
    const std::size_t n = logits.size();
    for (std::size_t i = 0; i < n; ++i) o[i] = exp_nonpositive_core((l[i] - mx) * inv_t);
}

double sum_weights(std::span<const float> w) {
    constexpr std::size_t kLanes = 8;
    double lane[kLanes] = {};
    const std::size_t n = w.size();
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::size_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(w[i + l]);
    for (std::size_t l = 0; i < n; ++i, ++l) lane[l] += static_cast<double>(w[i]);
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

void drop_below(std::span<float> w, float floor, bool ties) {
    float* v = w.data();
    const std::size_t n = w.size();
    if (ties)
        for (std::size_t i = 0; i < n; ++i) v[i] = v[i] <= floor ? 0.0f : v[i];
    else
        for (std::size_t i = 0; i < n; ++i) v[i] = v[i] < floor ? 0.0f : v[i];
}

}  // namespace inkling::sampling
