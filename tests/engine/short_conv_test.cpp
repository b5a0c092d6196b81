// forward::short_conv's one-row path (a decode step, kernels of 2-5 taps) against its
// several-rows paths: a sequence fed one row at a time gives the bits of the same rows at
// once, for the outputs and the state the next step starts from; and the prompt path against
// the conv written out a row and channel at a time.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/forward/forward.h"

namespace {

// Random weights, rows of input and a state for a kernel of `kernel` taps.
struct ConvCase {
    std::vector<float> w, x, state;
};
ConvCase random_case(std::mt19937& gen, int kernel, std::int64_t channels, std::int64_t rows) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    ConvCase k{std::vector<float>(static_cast<std::size_t>(channels * kernel)),
               std::vector<float>(static_cast<std::size_t>(rows * channels)),
               std::vector<float>(static_cast<std::size_t>(channels * (kernel - 1)))};
    for (auto* v : {&k.w, &k.x, &k.state})
        for (auto& e : *v) e = nd(gen);
    return k;
}

}  // namespace

TEST_CASE("the short conv gives the same bits a row at a time as over all rows at once") {
    std::mt19937 gen(5);
    for (int kernel : {1, 2, 3, 4, 5, 6}) {
        for (std::int64_t channels : {1, 7, 64, 1000}) {
            const std::int64_t rows = 9;
            const auto [w, x, state] = random_case(gen, kernel, channels, rows);
            std::vector<float> all = x, all_state = state, one = x, one_state = state;
            inkling::forward::short_conv(all.data(), rows, channels, w.data(), kernel, all_state.data());
            for (std::int64_t t = 0; t < rows; ++t)
                inkling::forward::short_conv(one.data() + t * channels, 1, channels, w.data(), kernel, one_state.data());
            INFO("kernel ", kernel, " channels ", channels);
            CHECK(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)) == 0);
            // (A one-tap conv keeps no state: memcmp may not take its null data, even for 0 bytes.)
            CHECK((all_state.empty() ||
                   std::memcmp(all_state.data(), one_state.data(), all_state.size() * sizeof(float)) == 0));
        }
    }
}

TEST_CASE("the short conv over many rows is the causal depthwise conv, in its order of sums") {
    // y[t][c] = x[t][c] + Σ_j w[c][j]·u[t − taps + j][c] (j = 0 … taps, oldest first; u is the
    // input, the state before row 0), the state left as the last taps inputs: written out
    // here a row and channel at a time, against the vectorized prompt path.
    std::mt19937 gen(6);
    for (int kernel : {2, 3, 4, 5}) {
        for (std::int64_t channels : {1, 17, 1024}) {
            const std::int64_t rows = 37, taps = kernel - 1;
            const auto [w, x, state] = random_case(gen, kernel, channels, rows);
            auto input = [&](std::int64_t t, std::int64_t c) {
                return t < 0 ? state[static_cast<std::size_t>(c * taps + taps + t)] : x[static_cast<std::size_t>(t * channels + c)];
            };
            std::vector<float> want(x.size()), want_state(state.size());
            for (std::int64_t t = 0; t < rows; ++t)
                for (std::int64_t c = 0; c < channels; ++c) {
                    float acc = 0.0f;
                    for (int j = 0; j < kernel; ++j) {
                        // Rounded before the sum, as the engine's file (compiled without
                        // contraction) does it; ARM64 would fuse the two here.
                        const volatile float product = w[static_cast<std::size_t>(c * kernel + j)] * input(t - taps + j, c);
                        acc += product;
                    }
                    want[static_cast<std::size_t>(t * channels + c)] = input(t, c) + acc;
                }
            for (std::int64_t c = 0; c < channels; ++c)
                for (std::int64_t j = 0; j < taps; ++j) want_state[static_cast<std::size_t>(c * taps + j)] = input(rows - taps + j, c);
            std::vector<float> got = x, got_state = state;
            inkling::forward::short_conv(got.data(), rows, channels, w.data(), kernel, got_state.data());
            INFO("kernel ", kernel, " channels ", channels);
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(got_state.data(), want_state.data(), got_state.size() * sizeof(float)) == 0);
        }
    }
}
