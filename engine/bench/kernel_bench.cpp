#include "engine/bench/kernel_bench.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "engine/bench/memory_bandwidth.h"
#include "engine/cpu/kernels.h"
#include "engine/quant/quantize.h"

namespace inkling::bench {
namespace {

using model::DType;

// Page-aligned memory on huge pages where the kernel offers them, first touched by the
// threads that will read it (as measure_read_bandwidth does, so the ratio compares like
// with like).
struct Buffer {
    std::unique_ptr<std::byte[], decltype(&std::free)> bytes{nullptr, &std::free};
    std::size_t size = 0;
    Buffer(std::size_t n, cpu::ThreadPool& pool) : size(n) {
        const std::size_t rounded = (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        bytes.reset(static_cast<std::byte*>(std::aligned_alloc(2u << 20, rounded)));
        madvise(bytes.get(), rounded, MADV_HUGEPAGE);
        pool.parallel_for(static_cast<std::int64_t>(n / 64), [&](std::int64_t b, std::int64_t e) {
            std::uint64_t state = 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(b);
            for (std::int64_t i = b * 64; i < e * 64; ++i) {
                state ^= state << 13, state ^= state >> 7, state ^= state << 17;
                bytes[static_cast<std::size_t>(i)] = static_cast<std::byte>(state);
            }
        });
    }
};

struct Format {
    const char* name;
    DType dtype;
    std::int64_t group;  // Q4 only
};

// A [rows][cols] matrix of `f` filling about `bytes`, its values random but valid: int8 in
// [-127, 127], scales positive and small, bf16 finite.
struct BenchMatrix {
    model::Matrix m;
    std::unique_ptr<Buffer> data, scales;
};

BenchMatrix make_matrix(const Format& f, std::int64_t cols, std::size_t bytes, cpu::ThreadPool& pool) {
    BenchMatrix b;
    model::Matrix& m = b.m;
    m.dtype = f.dtype;
    m.cols = cols;
    m.row_stride = model::is_quantized(f.dtype) ? quant::padded_cols(cols) : cols;
    std::int64_t groups = 0;
    if (f.dtype == DType::I8) m.group = m.row_stride, groups = 1;
    if (f.dtype == DType::Q4) m.group = f.group, groups = m.row_stride / f.group;
    const std::size_t row_bytes = model::dtype_bytes(f.dtype, m.row_stride) + static_cast<std::size_t>(groups) * 4;
    m.rows = static_cast<std::int64_t>((bytes + row_bytes - 1) / row_bytes);
    b.data = std::make_unique<Buffer>(model::dtype_bytes(f.dtype, m.rows * m.row_stride), pool);
    m.data = b.data->bytes.get();
    std::byte* p = b.data->bytes.get();
    for (std::size_t i = 0; i < b.data->size; ++i) {
        if (f.dtype == DType::I8 && p[i] == std::byte{0x80}) p[i] = std::byte{0};
        if (f.dtype == DType::BF16 && i % 2 == 1) p[i] = (p[i] & std::byte{0x83}) | std::byte{0x3c};  // |v| < 2
    }
    if (groups) {
        b.scales = std::make_unique<Buffer>(static_cast<std::size_t>(m.rows * groups) * 4, pool);
        auto* s = reinterpret_cast<float*>(b.scales->bytes.get());
        for (std::int64_t i = 0; i < m.rows * groups; ++i) s[i] = 1e-3f * static_cast<float>(1 + i % 97);
        m.scales = s;
        m.scale_stride = groups;
    }
    return b;
}

double seconds(const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

nlohmann::json bench_kernels(cpu::ThreadPool& pool, std::size_t weight_bytes) {
    const std::int64_t cols = 4096, batch = 64;
    const double bandwidth = measure_read_bandwidth(std::size_t{2} << 30, 5, pool);
    nlohmann::json out;
    out["threads"] = pool.size();
    out["isa"] = cpu::isa_name(cpu::active_isa());
    out["memory_bandwidth_gb_s"] = bandwidth;
    out["cols"] = cols;
    std::fprintf(stderr, "[bench] kernels (%s, %u threads), memory bandwidth %.2f GB/s\n",
                 cpu::isa_name(cpu::active_isa()), pool.size(), bandwidth);
    std::vector<float> x(static_cast<std::size_t>(batch * cols));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7919 % 2001) - 1000) / 500.0f;
    for (const Format& f : {Format{"int8", DType::I8, 0}, Format{"int4", DType::Q4, 32}, Format{"bf16", DType::BF16, 0}}) {
        const BenchMatrix b = make_matrix(f, cols, weight_bytes, pool);
        const model::Matrix& w = b.m;
        std::vector<float> y(static_cast<std::size_t>(batch * w.rows));
        // n = 1: every weight byte once, from memory (the matrix is far larger than the caches).
        cpu::matmul(x.data(), 1, w, y.data(), pool);
        std::vector<double> t1;
        for (int r = 0; r < 5; ++r) t1.push_back(seconds([&] { cpu::matmul(x.data(), 1, w, y.data(), pool); }));
        const double gb_s = static_cast<double>(w.bytes()) / median(t1) / 1e9;
        // n = 64 on a quarter of the rows (the figure is compute, not bandwidth).
        const model::Matrix part = w.slice_rows(0, w.rows / 4);
        std::vector<double> t64;
        for (int r = 0; r < 3; ++r) t64.push_back(seconds([&] { cpu::matmul(x.data(), batch, part, y.data(), pool); }));
        const double gflop_s = 2.0 * static_cast<double>(part.rows * cols * batch) / median(t64) / 1e9;
        out["formats"].push_back({{"format", f.name},
                                  {"rows", w.rows},
                                  {"matrix_bytes", w.bytes()},
                                  {"n1_gb_s", gb_s},
                                  {"n1_fraction_of_bandwidth", gb_s / bandwidth},
                                  {"n64_gflop_s", gflop_s}});
        std::fprintf(stderr, "[bench] %s: %.0f MB [%lld x %lld]; n=1 %.2f GB/s = %.0f%% of the measured bandwidth; "
                             "n=64 %.1f GFLOP/s\n",
                     f.name, static_cast<double>(w.bytes()) / 1e6, static_cast<long long>(w.rows),
                     static_cast<long long>(cols), gb_s, 100.0 * gb_s / bandwidth, gflop_s);
    }
    return out;
}

}  // namespace inkling::bench
