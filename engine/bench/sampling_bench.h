// `inkling bench --sampling`: the sampler alone (engine/sampling/sampler.h) on synthetic
// logits over Inkling's vocabulary (201,024 entries) — greedy, temperature over the whole
// distribution, top-p, top-k and both — on a flat row (top-p's cut deep in the vocabulary)
// and a peaked one (a language model's usual shape), in ms a token and as a multiple of the
// greedy pick (one pass over the row), measured in the same run. It runs once a decoded
// token on the engine's thread while the pool waits, so it adds to every step's time.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

namespace inkling::bench {

// Prints one line a setting to stderr and returns the figures.
nlohmann::json bench_sampling(std::size_t vocab = 201024);

}  // namespace inkling::bench
