// The yardstick for decode speed: how fast this machine streams memory it has not read
// recently, measured by the same binary in the same run as the model.
#pragma once

#include <cstddef>

#include "engine/cpu/thread_pool.h"

namespace inkling::bench {

// Reads a `bytes`-sized buffer (far larger than the caches) with every thread of `pool`,
// `repeats` times; returns the median GB/s (1e9 bytes per second).
double measure_read_bandwidth(std::size_t bytes, int repeats, cpu::ThreadPool& pool);

}  // namespace inkling::bench
