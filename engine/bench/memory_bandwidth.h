// The yardstick for decode speed: how fast this machine streams memory it has not read
// recently, measured by the same binary in the same run as the model.
#pragma once

#include <cstddef>

#include "engine/cpu/thread_pool.h"

namespace inkling::bench {

// Reads a `bytes`-sized buffer (far larger than the caches, on huge pages) with as many
// threads as `pool` has, each pinned to one of the process's CPUs and summing its slice
// with eight independent AVX-512 loads in flight (AVX2 or scalar where the CPU lacks it),
// `repeats` times; returns the median GB/s (1e9 bytes per second). This is the tuned read
// loop the decode kernels are held to (shared/specs/cpu-baselines.md).
double measure_read_bandwidth(std::size_t bytes, int repeats, cpu::ThreadPool& pool);

}  // namespace inkling::bench
