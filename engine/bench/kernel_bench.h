// `inkling bench --kernels`: the matmul kernels on synthetic weights far larger than the
// caches — int8, int4 (groups of 32) and bf16 — at one activation row (decode: GB/s of
// weights streamed, and its ratio to the read bandwidth measured in the same run) and at
// 64 rows (prefill: GFLOP/s).
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "engine/cpu/thread_pool.h"

namespace inkling::bench {

// `weight_bytes`: the size of each format's matrix (at least 256 MB keeps it out of
// cache). Prints one line a format to stderr and returns the figures.
nlohmann::json bench_kernels(cpu::ThreadPool& pool, std::size_t weight_bytes);

}  // namespace inkling::bench
