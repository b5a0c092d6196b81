#include "engine/bench/kernel_bench.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/bench/memory_bandwidth.h"
#include "engine/cpu/bf16_matmul.h"
#include "engine/cpu/int_kernels.h"
#include "engine/cpu/kernels.h"
#include "engine/quant/quantize.h"
#include "engine/model/lane_order.h"
#include "platform/memory.h"

namespace inkling::bench {
namespace {

using model::DType;

// Page-aligned memory on huge pages where the kernel offers them, first touched by the
// pool's threads (the ones that read it).
struct Buffer {
    std::unique_ptr<std::byte[], decltype(&platform::free_aligned)> bytes{nullptr, &platform::free_aligned};
    std::size_t size = 0;
    Buffer(std::size_t n, cpu::ThreadPool& pool, std::uint64_t seed) : size(n) {
        const std::size_t rounded = (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        bytes.reset(static_cast<std::byte*>(platform::allocate_aligned(2u << 20, rounded)));
        platform::advise_huge_pages(bytes.get(), rounded);
        pool.parallel_for(static_cast<std::int64_t>((n + 63) / 64), [&](std::int64_t b, std::int64_t e) {
            std::uint64_t state = 0x9e3779b97f4a7c15ull ^ seed ^ static_cast<std::uint64_t>(b);
            for (std::int64_t i = b * 64; i < std::min<std::int64_t>(e * 64, static_cast<std::int64_t>(n)); ++i) {
                state ^= state << 13, state ^= state >> 7, state ^= state << 17;
                bytes[static_cast<std::size_t>(i)] = static_cast<std::byte>(state);
            }
        });
    }
};

// A [rows][cols] matrix of `dtype` (Q4: groups of 32), its values random but valid: int8
// in [-127, 127], scales positive and small, bf16 finite with |v| < 2.
struct BenchMatrix {
    model::Matrix m;
    std::unique_ptr<Buffer> data, scales;
};

BenchMatrix make_matrix(DType dtype, KernelShape shape, cpu::ThreadPool& pool, std::uint64_t seed) {
    BenchMatrix b;
    model::Matrix& m = b.m;
    m.dtype = dtype;
    m.rows = shape.rows;
    m.cols = shape.cols;
    m.row_stride = model::is_quantized(dtype) ? quant::padded_cols(shape.cols) : shape.cols;
    std::int64_t groups = 0;
    if (dtype == DType::I8) m.group = m.row_stride, groups = 1;
    if (dtype == DType::Q4) m.group = 32, groups = m.row_stride / 32;
    b.data = std::make_unique<Buffer>(model::dtype_bytes(dtype, m.rows * m.row_stride), pool, seed);
    m.data = b.data->bytes.get();
    std::byte* p = b.data->bytes.get();
    const auto size = static_cast<std::int64_t>(b.data->size);
    pool.parallel_for(size / 2, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = 2 * lo; i < 2 * hi; ++i) {
            if (dtype == DType::I8 && p[i] == std::byte{0x80}) p[i] = std::byte{0};
            if (dtype == DType::BF16 && i % 2 == 1) p[i] = (p[i] & std::byte{0x83}) | std::byte{0x3c};
        }
    });
    // int8/int4 in the layout the engine's loader gives the active ISA's kernels.
    if (model::is_quantized(dtype) && cpu::lane_order_active()) {
        const auto row_bytes = static_cast<std::int64_t>(model::dtype_bytes(dtype, m.row_stride));
        pool.parallel_for(m.rows, [&](std::int64_t lo, std::int64_t hi) {
            model::pack_lanes(dtype, p + lo * row_bytes, hi - lo, m.cols, row_bytes);
        });
        m.lane_packed = true;
    }
    if (groups) {
        b.scales = std::make_unique<Buffer>(static_cast<std::size_t>(m.rows * groups) * 4, pool, seed + 1);
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

// n = 1 on one core over ~512 KiB of weights that stay in its L2 (GB/s of weights, the best
// of five passes of ~20 ms): what the kernel turns over when memory is not the limit. Set
// beside the read loop's share of one core, it says whether a decode at n = 1 could be bound
// by the kernel's operations on a machine with more bandwidth a core (this VM's slow minutes
// slow the cores too: compare within a run).
double in_l2_one_core_gb_s(DType dtype, std::int64_t cols, const float* x) {
    cpu::ThreadPool solo(1);
    const double row_bytes = static_cast<double>(model::dtype_bytes(dtype, model::is_quantized(dtype) ? quant::padded_cols(cols) : cols));
    const auto rows = std::max<std::int64_t>(1, static_cast<std::int64_t>((512 << 10) / row_bytes));
    const BenchMatrix b = make_matrix(dtype, {rows, cols}, solo, 7);
    std::vector<float> y(static_cast<std::size_t>(rows));
    const double bytes = static_cast<double>(b.m.bytes());
    const int reps = std::max(1, static_cast<int>(20e-3 * 20e9 / bytes));  // ~20 ms at 20 GB/s
    double best = 0;
    for (int t = 0; t < 5; ++t) {
        const double s = seconds([&] {
            for (int r = 0; r < reps; ++r) cpu::matmul(x, 1, b.m, y.data(), solo);
        });
        best = std::max(best, bytes * reps / s / 1e9);
    }
    return best;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

// ggml's figures beside ours, for orientation only: another day, and where our ISA is not
// AVX-512 another CPU. n = 1 as a ratio to the read loop of the same minutes, the rest in
// GFLOP/s; "" where the source has no figure. Two sources, picked by the ISA we run:
//  - AVX-512: measured 2026-12-01 on a 2-vCPU AMD Zen 4 of the same VM kind, in the same
//    minutes as our kernels: ggml d99724f2 with llama.cpp's defaults (llamafile sgemm, q4_0
//    repacked), `test-backend-ops perf -o MUL_MAT` at 4096 x 14336; read loop 32-33 GB/s;
//  - AVX2: measured here 2026-12-03 on a 2-vCPU AMD Zen 3 (EPYC, family 25 model 1, no
//    AVX-512) of the same VM kind: ggml d99724f2 built with GGML_NATIVE and GGML_LLAMAFILE
//    on, `test-backend-ops perf -o MUL_MAT` at its 4096 x 14336 shape (n = 64 added),
//    q4_0 not repacked (that harness has no repack buffer); read loop 26.6-27.3 GB/s.
// Both are in docs/performance.md, "ggml for orientation".
struct Ggml {
    const char* n1_ratio;
    const char* n64;
    const char* n512;
};

struct GgmlSource {
    const char* label;
    Ggml bf16, i8, q4;
};

const GgmlSource& ggml_source(cpu::Isa isa) {
    static const GgmlSource zen4{"docs/performance.md, 2026-12-01 (AMD Zen 4, AVX-512, 2 threads, llama.cpp defaults)",
                                 {"0.60-0.72", "128", "132-142"},
                                 {"0.48-0.53", "151", ""},
                                 {"0.43-0.45", "209", "139"}};
    static const GgmlSource zen3{"docs/performance.md, 2026-12-03 (AMD Zen 3, AVX2, 2 threads, llamafile sgemm, q4_0 not repacked)",
                                 {"0.66-0.71", "103", "90"},
                                 {"0.54-0.55", "92", "90"},
                                 {"0.39-0.46", "86", "82"}};
    return isa == cpu::Isa::Avx2 ? zen3 : zen4;
}

Ggml ggml_for(const GgmlSource& source, DType dtype) {
    switch (dtype) {
    case DType::BF16: return source.bf16;
    case DType::I8: return source.i8;
    case DType::Q4: return source.q4;
    default: break;
    }
    return {"", "", ""};
}

struct Variant {
    const char* name;
    DType dtype;
    cpu::Numerics numerics;
    bool dot;  // vdpbf16ps (bf16 numerics only)
};

}  // namespace

KernelShape parse_kernel_shape(const std::string& text) {
    const auto bad = [&](const std::string& why) {
        return std::runtime_error("--kernel-shape " + text + ": " + why + " (expected ROWSxCOLS, e.g. 1024x1024)");
    };
    const std::size_t x = text.find('x');
    if (x == std::string::npos) throw bad("no 'x' between rows and columns");
    const auto number = [&](const std::string& part, const char* what) {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
        if (part.empty() || ec != std::errc() || end != part.data() + part.size())
            throw bad(std::string(what) + " '" + part + "' is not a whole number");
        // 2^20 rows or columns is past any model's matrix; it keeps rows × cols × 512 in range.
        if (v < 1 || v > (std::int64_t{1} << 20)) throw bad(std::string(what) + " must lie in 1..1048576");
        return v;
    };
    return {number(text.substr(0, x), "rows"), number(text.substr(x + 1), "columns")};
}

nlohmann::json bench_kernels(cpu::ThreadPool& pool, std::size_t weight_bytes, KernelShape shape) {
    // ggml was measured at the default shape only.
    const bool baseline = shape == KernelShape{};
    // The yardstick is measured again right before and after each n = 1 figure, which is
    // divided by their mean: this VM's bandwidth moves within seconds.
    ReadBandwidth probe(std::size_t{2} << 30, pool.size());
    const double bandwidth = probe.measure(5);
    const cpu::Numerics saved_numerics = cpu::active_numerics();
    const bool saved_dot = cpu::bf16_dot_product_active();
    nlohmann::json out;
    out["cpu"] = cpu_model();
    out["threads"] = pool.size();
    out["isa"] = cpu::isa_name(cpu::active_isa());
    // int8/int4 weights in the order the loader gives this ISA's kernels (model/lane_order.h).
    out["integer_layout"] = cpu::lane_order_active() ? "lanes" : "columns";
    out["memory_bandwidth_gb_s"] = bandwidth;
    out["rows"] = shape.rows;
    out["cols"] = shape.cols;
    static const GgmlSource none{"none at this shape", {"", "", ""}, {"", "", ""}, {"", "", ""}};
    const GgmlSource& ggml = baseline ? ggml_source(cpu::active_isa()) : none;
    out["ggml_source"] = ggml.label;
    std::fprintf(stderr,
                 "[bench] kernels on %s (%s, %u threads); read bandwidth %.2f GB/s (pinned read loop of the widest SIMD loads, 2 GiB)\n"
                 "[bench] weights [%lld x %lld]; n=1 over >= %.0f MB of distinct weights (GB/s, and x the read "
                 "bandwidth measured right before and after), n=64 and n=512 on one matrix (GFLOP/s)\n"
                 "[bench] %-18s %25s %8s %9s  | ggml (%s): n=1 x read loop, n=64, n=512\n",
                 out["cpu"].get<std::string>().c_str(), cpu::isa_name(cpu::active_isa()), pool.size(), bandwidth,
                 static_cast<long long>(shape.rows), static_cast<long long>(shape.cols), static_cast<double>(weight_bytes) / 1e6,
                 "weights", "n=1", "n=64", "n=512", ggml.label);
    std::vector<Variant> variants = {{"bf16 exact", DType::BF16, cpu::Numerics::Exact, false},
                                     {"bf16 bf16-act fma", DType::BF16, cpu::Numerics::Bf16, false}};
    if (cpu::has_avx512_bf16() && cpu::active_isa() == cpu::Isa::Avx512)
        variants.push_back({"bf16 bf16-act dot", DType::BF16, cpu::Numerics::Bf16, true});
    variants.push_back({"int8", DType::I8, cpu::Numerics::Exact, false});
    variants.push_back({"int4 g32", DType::Q4, cpu::Numerics::Exact, false});
    const std::int64_t max_n = 512;
    std::vector<float> x(static_cast<std::size_t>(max_n * shape.cols));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7919 % 2001) - 1000) / 500.0f;
    std::vector<float> y(static_cast<std::size_t>(max_n * shape.rows));
    std::vector<BenchMatrix> mats;
    DType built = DType::F32;
    for (const Variant& v : variants) {
        if (mats.empty() || built != v.dtype) {
            mats.clear();
            mats.push_back(make_matrix(v.dtype, shape, pool, 0));
            const std::size_t one = mats[0].m.bytes();
            const std::size_t copies = std::max<std::size_t>(1, (weight_bytes + one - 1) / one);
            for (std::size_t c = 1; c < copies; ++c) mats.push_back(make_matrix(v.dtype, shape, pool, c));
            built = v.dtype;
        }
        cpu::set_numerics(v.numerics);
        cpu::set_bf16_dot_product(v.dot);
        const model::Matrix& w = mats[0].m;
        // n = 1: every weight byte once per pass, from memory (the matrices together exceed
        // the caches: a decode step).
        auto pass = [&] {
            for (const BenchMatrix& b : mats) cpu::matmul(x.data(), 1, b.m, y.data(), pool);
        };
        const double bytes = static_cast<double>(w.bytes()) * static_cast<double>(mats.size());
        for (int r = 0; r < 3; ++r) pass();  // warming up (a first pass after the fill runs slow)
        const double bw_before = probe.measure(3);
        std::vector<double> t1, all;
        for (int r = 0; r < 5; ++r) {
            t1.push_back(seconds(pass));
            all.push_back(bytes / t1.back() / 1e9);
        }
        // bf16 at n = 1 in the other decode order too (bf16_decode_interleave_active: which
        // is faster depends on the CPU's prefetchers; the default is picked by vendor).
        double other_gb_s = 0;
        if (v.dtype == DType::BF16) {
            const bool interleave = cpu::bf16_decode_interleave_active();
            cpu::set_bf16_decode_interleave(!interleave);
            std::vector<double> t2;
            for (int r = 0; r < 5; ++r) t2.push_back(seconds(pass));
            cpu::set_bf16_decode_interleave(interleave);
            other_gb_s = bytes / median(t2) / 1e9;
        }
        const double bw_after = probe.measure(3);
        const double gb_s = bytes / median(t1) / 1e9, yardstick = (bw_before + bw_after) / 2;
        auto gflops = [&](std::int64_t n, int repeats) {
            cpu::matmul(x.data(), n, w, y.data(), pool);
            std::vector<double> t;
            for (int r = 0; r < repeats; ++r) t.push_back(seconds([&] { cpu::matmul(x.data(), n, w, y.data(), pool); }));
            return 2.0 * static_cast<double>(shape.rows * shape.cols * n) / median(t) / 1e9;
        };
        const double g64 = gflops(64, 5), g512 = gflops(512, 3);
        const double in_l2 = in_l2_one_core_gb_s(v.dtype, shape.cols, x.data());
        const double in_l2_x_share = in_l2 / (yardstick / pool.size());
        const Ggml g = ggml_for(ggml, v.dtype);
        out["formats"].push_back({{"format", v.name},
                                  {"numerics", cpu::numerics_name(v.numerics)},
                                  {"bf16_dot_product", v.dot},
                                  {"matrix_bytes", w.bytes()},
                                  {"n1_matrices", mats.size()},
                                  {"n1_gb_s", gb_s},
                                  {"n1_passes_gb_s", all},
                                  {"bandwidth_before_gb_s", bw_before},
                                  {"bandwidth_after_gb_s", bw_after},
                                  {"n1_fraction_of_bandwidth", gb_s / yardstick},
                                  {"n1_decode_interleave", v.dtype == DType::BF16 && cpu::bf16_decode_interleave_active()},
                                  {"n1_other_order_gb_s", other_gb_s},
                                  {"n1_in_l2_one_core_gb_s", in_l2},
                                  {"n1_in_l2_one_core_x_read_loop_share", in_l2_x_share},
                                  {"n64_gflop_s", g64},
                                  {"n512_gflop_s", g512},
                                  {"ggml_n1_fraction_of_read_loop", g.n1_ratio},
                                  {"ggml_n64_gflop_s", g.n64},
                                  {"ggml_n512_gflop_s", g.n512}});
        std::fprintf(stderr, "[bench] %-18s %6.2f GB/s (%.2f of %5.2f) %8.1f %9.1f  | %s, %s, %s\n", v.name, gb_s,
                     gb_s / yardstick, yardstick, g64, g512, *g.n1_ratio ? g.n1_ratio : "-", *g.n64 ? g.n64 : "-",
                     *g.n512 ? g.n512 : "-");
        if (other_gb_s > 0)
            std::fprintf(stderr, "[bench] %-18s n=1 in the other decode order (%s): %.2f GB/s\n", "",
                         cpu::bf16_decode_interleave_active() ? "adjacent rows a tile" : "rows in parts", other_gb_s);
        std::fprintf(stderr, "[bench] %-18s n=1 on one core over weights in its L2: %.2f GB/s (%.2f x a core's share of the read loop)\n",
                     "", in_l2, in_l2_x_share);
    }
    cpu::set_numerics(saved_numerics);
    cpu::set_bf16_dot_product(saved_dot);
    // The yardstick again, after the kernels: how much the machine moved during the run.
    const double after = probe.measure(5);
    out["memory_bandwidth_after_gb_s"] = after;
    std::fprintf(stderr, "[bench] read bandwidth after the kernels: %.2f GB/s\n", after);
    return out;
}

}  // namespace inkling::bench
