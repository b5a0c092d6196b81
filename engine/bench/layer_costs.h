// Where a benchmark's steps spent their time, layer by layer: the per-layer cost `make bench`
// extrapolates from a few layers of a geometry to the whole model (tools/bench/small.py).
#pragma once

#include <nlohmann/json.hpp>

#include "engine/forward/meter.h"
#include "engine/model/config.h"

namespace inkling::bench {

// The time between two snapshots of a forward's phase times, over `tokens` tokens: the
// embedding, lm_head (with the final norm) and each layer (its kind, total ms and ms a
// token), and the phases summed over all layers. Layers the Vulkan chain ran are absent
// from `layers` (the CPU backend times only its own).
nlohmann::json layer_costs(const model::Config& config, const forward::PhaseTimes& before,
                           const forward::PhaseTimes& after, int tokens);

}  // namespace inkling::bench
