// The Vulkan device's own roofline, measured in the run that reports against it: a copy
// shader's bandwidth (bytes read + written per second) and the chain's GEMV at one
// activation row (weight bytes read per second), f32 and bf16.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

namespace inkling::bench {

// `device`: Vulkan device index (-1: the best ranked); `mb`: the copy's buffer size.
nlohmann::json bench_device_kernels(int device, std::size_t mb);

}  // namespace inkling::bench
