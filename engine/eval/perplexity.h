// Teacher-forced scoring of a token sequence: the summed negative log-likelihood of each
// token given the ones before it, and the perplexity. `inkling eval` and the quality
// figures of quantized and device backends use it.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "engine/forward/forward.h"

namespace inkling::eval {

struct Score {
    double nll = 0;          // Σ −log p(token | previous tokens), natural log
    std::int64_t tokens = 0;  // tokens scored
    double mean_nll() const { return tokens ? nll / static_cast<double>(tokens) : 0.0; }
    double perplexity() const { return std::exp(mean_nll()); }
};

// Scores `ids` in windows of `window` tokens, each from a fresh state (every token of a
// window but its first is scored), feeding `chunk` tokens per forward step. The
// log-softmax is taken in double over the unpadded vocabulary.
Score score(forward::Forward& fw, std::span<const std::int32_t> ids, std::int64_t window, std::int64_t chunk = 256);

}  // namespace inkling::eval
