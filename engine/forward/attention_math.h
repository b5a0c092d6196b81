// The pieces of Inkling's attention score that more than one place computes: the CPU
// forward (forward.cpp), and the host's share of a split layer next to the Vulkan chain
// (vulkan/chain.cpp), which must score old positions exactly as the CPU does.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/model/config.h"

namespace inkling::forward {

// tau at position p of layer `layer`: 1 + alpha·ln((p+1)/n_floor) past n_floor on global
// layers with tau, else 1 (computed in double, then rounded).
inline float attention_tau(const model::Config& c, int layer, std::int64_t p) {
    if (c.kinds[layer].local || c.log_floor <= 0) return 1.0f;
    const double en = static_cast<double>(p + 1) / c.log_floor;
    return en > 1.0 ? static_cast<float>(1.0 + c.log_alpha * std::log(en)) : 1.0f;
}

// One score: (q·k / hd + bias) · tau.
inline float attention_score(float qk, float inv_hd, float bias, float tau) { return (qk * inv_hd + bias) * tau; }

}  // namespace inkling::forward
