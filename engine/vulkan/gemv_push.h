// The push constants of shaders/gemv.comp (the chain's projections, the device benchmark
// and the tests all dispatch it): y[s][o] = Σ_i x[s][i]·W[o][i], offsets in elements.
#pragma once

#include <cstdint>

namespace inkling::vulkan {

struct GemvPush {
    std::uint32_t O, I, S;            // output rows, columns, activation rows
    std::uint32_t stride, w_off;      // weight row stride and first element
    std::uint32_t x_off, x_stride;    // first float of x, floats between its rows
    std::uint32_t y_off, y_stride;    // first float of y, floats between its rows
};

}  // namespace inkling::vulkan
