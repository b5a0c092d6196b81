// forward::short_conv's one-row path (a decode step, kernels of 2-5 taps) against its
// general path: a sequence fed one row at a time gives the bits of the same rows at once,
// for the outputs and the state the next step starts from.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/forward/forward.h"

TEST_CASE("the short conv gives the same bits a row at a time as over all rows at once") {
    std::mt19937 gen(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int kernel : {1, 2, 3, 4, 5, 6}) {
        for (std::int64_t channels : {1, 7, 64, 1000}) {
            const std::int64_t rows = 9, taps = kernel - 1;
            std::vector<float> w(static_cast<std::size_t>(channels * kernel)), x(static_cast<std::size_t>(rows * channels)),
                state(static_cast<std::size_t>(channels * taps));
            for (auto& v : w) v = nd(gen);
            for (auto& v : x) v = nd(gen);
            for (auto& v : state) v = nd(gen);
            std::vector<float> all = x, all_state = state, one = x, one_state = state;
            inkling::forward::short_conv(all.data(), rows, channels, w.data(), kernel, all_state.data());
            for (std::int64_t t = 0; t < rows; ++t)
                inkling::forward::short_conv(one.data() + t * channels, 1, channels, w.data(), kernel, one_state.data());
            INFO("kernel ", kernel, " channels ", channels);
            CHECK(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(all_state.data(), one_state.data(), all_state.size() * sizeof(float)) == 0);
        }
    }
}
