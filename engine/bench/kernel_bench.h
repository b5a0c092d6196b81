// `inkling bench --kernels`: the matmul kernels on synthetic [14336 × 4096] weights, the
// shape of ggml's benchmark (or another, `--kernel-shape`) — bf16 (exact
// activations, bf16 activations through FMA, and through vdpbf16ps where the CPU has it),
// int8, int4 (groups of 32) — at one activation row (decode: GB/s of weights streamed over
// enough distinct matrices to miss the caches, and its ratio to the read bandwidth measured
// in the same run, before and after) and at 64 and 512 rows (prefill: GFLOP/s), with ggml's
// figures (docs/performance.md, "ggml for orientation") printed beside them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/cpu/thread_pool.h"

namespace inkling::bench {

// A weight matrix's shape: output rows × columns.
struct KernelShape {
    // The default: 4096 × 14336 weights as 14336 output rows of 4096 columns (an up
    // projection of a 4096-wide model), the shape of ggml's figures in docs/performance.md.
    // options.cpp's --kernel-shape default spells the same.
    std::int64_t rows = 14336, cols = 4096;
    bool operator==(const KernelShape&) const = default;
};

// "ROWSxCOLS" (e.g. "1024x1024", a decode step's small products); throws std::runtime_error
// naming the flag and what was wrong.
KernelShape parse_kernel_shape(const std::string& text);

// `weight_bytes`: at least this many bytes of distinct matrices per format for n = 1 (1 GB
// keeps them out of any L3; each matrix is 117 MB in bf16 at the default shape). Prints one
// line a format to stderr and returns the figures; ggml's beside them at the default shape
// only.
nlohmann::json bench_kernels(cpu::ThreadPool& pool, std::size_t weight_bytes, KernelShape shape = {});

}  // namespace inkling::bench
