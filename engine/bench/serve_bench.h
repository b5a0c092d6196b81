// Serve-mode figures for `inkling bench`: aggregate decode speed with several sessions
// batched together, and time to first token with and without prefix reuse.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cpu/thread_pool.h"
#include "engine/model/weights.h"

namespace inkling::forward {
class Forward;
}

namespace inkling::bench {

// A fixed pseudo-random prompt of `n` ids over the vocabulary (never EOS or the audio
// placeholder), the same for the same seed.
std::vector<std::int32_t> pseudo_prompt(const model::Config& config, int n, std::uint64_t seed);

// For each count n: n sessions decoding `tokens` greedy tokens each at once; aggregate
// tokens/s (the median of three interleaved sweeps over the counts, each sweep's figure
// kept too), and its ratio to the first count's. `attach` gets the scheduler's forward
// first (the Vulkan chain, as the run's flags say).
nlohmann::json bench_sessions(const model::Model& model, cpu::ThreadPool& pool, const std::vector<int>& counts,
                              int tokens, const std::function<void(forward::Forward&)>& attach = {});

// A `conversation`-token first turn, then a follow-up turn that extends it: time to first
// token when the slot's state is reused, and when it is not (reset=1).
nlohmann::json bench_reuse(const model::Model& model, cpu::ThreadPool& pool, int conversation);

// Regenerating the last answer of a `conversation`-token chat (messages opened by a role
// marker, the serve default's turn boundaries): time to first token when the prefix up to
// the last boundary comes from its pinned snapshot, and cold (reset=1, a full prefill).
nlohmann::json bench_regenerate(const model::Model& model, cpu::ThreadPool& pool, int conversation);

}  // namespace inkling::bench
