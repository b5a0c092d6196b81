// The unnormalized softmax weights of a row of logits, e^((l − max) / T), in f32 through an
// exp of our own (engine/cpu/exp_core.h), and their sums in f64 in a fixed order. A sampled token reads every entry
// of the vocabulary (201,024 for Inkling): std::exp in double took 1.4 ms of it there. These
// loops are plain code the compiler vectorizes, and the file is compiled without
// floating-point contraction (engine/CMakeLists.txt), so every ISA and platform computes the
// same bits and a seed picks the same tokens everywhere.
#pragma once

#include <cstddef>
#include <span>

namespace inkling::sampling {

// e^x for x ≤ 0, within 2 ulp; exactly 0 below -87 (where the result would leave the normal
// floats), for -inf and for NaN (a NaN logit is never drawn). x > 0 is not expected.
float exp_nonpositive(float x);

// out[i] = exp_nonpositive((logits[i] − mx) · inv_t); out has logits' size.
void softmax_weights(std::span<const float> logits, float mx, float inv_t, std::span<float> out);

// Σ w in f64: eight lanes (entry i in lane i mod 8), then a fixed tree.
double sum_weights(std::span<const float> w);

// Sets to 0 every weight below `floor`, and those equal to it too where `ties` (a top-p cut:
// the ids after the cut's own).
void drop_below(std::span<float> w, float floor, bool ties);

}  // namespace inkling::sampling
