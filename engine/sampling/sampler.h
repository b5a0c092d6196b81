// Picks the next token from a row of logits: greedy (temperature 0), or temperature with
// top-k and top-p (applied in that order, as transformers does), after an optional
// repetition penalty. Seeded per request: the same seed and logits give the same tokens, on
// every ISA and platform (engine/sampling/weights.h). A draw costs a few passes over the
// vocabulary, top-p's cut included (a histogram of the weights, not a sort of the ids).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace inkling::sampling {

struct Params {
    double temperature = 0.0;         // 0 = greedy
    double top_p = 1.0;               // (0, 1]
    std::uint32_t top_k = 0;          // 0 = off
    double repetition_penalty = 1.0;  // 1 = off; > 1 discourages tokens already seen
    std::uint64_t seed = 0;
};

class Sampler {
public:
    explicit Sampler(const Params& params);
    // `history` is every id the penalty applies to (prompt and generated so far).
    std::int32_t next(std::span<const float> logits, std::span<const std::int32_t> history);

private:
    std::int32_t draw_top_k(std::span<const float> row, float mx, float inv_t, double u);
    std::int32_t draw_nucleus(double u);
    void sort_bucket();

    Params p_;
    std::mt19937_64 rng_;
    std::vector<float> work_;     // the logits after the penalty
    std::vector<float> weight_;   // e^((logit − max) / T): of every id, or of top-k's (in order_'s order)
    std::vector<double> mass_;    // weight per bucket (top-p)
    std::vector<std::int32_t> order_;   // candidates, most probable first
    std::vector<std::int32_t> sorted_;  // sort_bucket's output
    std::vector<std::uint32_t> start_;  // sort_bucket's counts, then positions
    std::vector<double> block_;   // kept weight per block of ids (the draw's walk)
};

// Index of the largest value; ties go to the lowest index.
std::int32_t argmax(std::span<const float> values);

// The indices of the k largest values, largest first (ties: the lower index first); NaNs are
// never among them, so fewer than k come back where the rest are NaN. One pass that compares
// each value with the k-th best so far: a logprobs request's alternatives, on every token.
std::vector<std::int32_t> largest(std::span<const float> values, std::size_t k);

// log Σ exp(values), shifted by the maximum so nothing overflows: the normaliser of a
// log-softmax (logprob of i = values[i] − log_sum_exp(values)). The terms are the sampler's
// f32 weights (within 2 ulp of e^x), summed in double; NaNs count as -inf, an empty or
// all -inf row gives -inf, a +inf value +inf.
double log_sum_exp(std::span<const float> values);

}  // namespace inkling::sampling
