// Every kernel on every ISA this CPU has, against a plain double-precision reference,
// for f32, bf16 and f16 weights, odd sizes (tails) and strided rows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/cpu/kernels.h"
#include "engine/cpu/thread_pool.h"

using namespace inkling;
using model::DType;
using model::Matrix;

namespace {

std::uint16_t to_bf16(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return static_cast<std::uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

// Round-to-nearest f16 for the normal range; values below 2^-14 become zero (the test
// data needs no subnormals).
std::uint16_t to_f16(float f) {
    std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    float a = std::fabs(f);
    if (a < std::ldexp(1.0f, -14)) return sign;
    int e;
    float m = std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1)
    long mant = std::lround((m * 2 - 1) * 1024);
    if (mant == 1024) mant = 0, ++e;
    return static_cast<std::uint16_t>(sign | ((e - 1 + 15) << 10) | mant);
}

struct Weights {
    std::vector<std::byte> bytes;
    Matrix m;
};

Weights make(DType t, std::int64_t rows, std::int64_t cols, std::int64_t stride, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1, 1);
    Weights w;
    w.bytes.resize(static_cast<std::size_t>(rows * stride) * model::dtype_size(t) + 64);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < stride; ++c) {
            float v = u(rng);
            std::byte* p = w.bytes.data() + static_cast<std::size_t>(r * stride + c) * model::dtype_size(t);
            if (t == DType::F32) std::memcpy(p, &v, 4);
            else {
                std::uint16_t h = t == DType::BF16 ? to_bf16(v) : to_f16(v);
                std::memcpy(p, &h, 2);
            }
        }
    w.m = {w.bytes.data(), t, rows, cols, stride};
    return w;
}

}  // namespace

TEST_CASE("matmul on every ISA and dtype matches a double-precision reference") {
    std::mt19937 rng(3);
    cpu::ThreadPool pool(2);
    for (cpu::Isa isa : cpu::isas()) {
        if (!cpu::isa_supported(isa)) {
            MESSAGE("skipping ISA " << std::string(cpu::isa_name(isa)) << ": this CPU lacks it");
            continue;
        }
        cpu::set_isa(isa);
        for (DType t : {DType::F32, DType::BF16, DType::F16})
            for (auto [rows, cols, stride, xs] : {std::tuple{7, 1, 1, 1}, {33, 131, 131, 3}, {64, 1024, 2048, 1},
                                                  {300, 257, 257, 5}, {5, 15, 16, 2}}) {
                std::string isa_text = cpu::isa_name(isa), dtype_text = model::dtype_name(t);
                CAPTURE(isa_text);
                CAPTURE(dtype_text);
                CAPTURE(cols);
                Weights w = make(t, rows, cols, stride, rng);
                std::vector<float> x(static_cast<std::size_t>(xs * cols)), y(static_cast<std::size_t>(xs * rows));
                std::uniform_real_distribution<float> u(-1, 1);
                for (auto& v : x) v = u(rng);
                cpu::matmul(x.data(), xs, w.m, y.data(), pool);
                for (std::int64_t s = 0; s < xs; ++s)
                    for (std::int64_t o = 0; o < rows; ++o) {
                        double want = 0;
                        for (std::int64_t i = 0; i < cols; ++i) want += double(w.m.at(o, i)) * x[s * cols + i];
                        CHECK(std::abs(y[s * rows + o] - want) <= 1e-5 * (1 + std::sqrt(double(cols))));
                    }
                // One row at a time (the decode path) gives bitwise the batch's result.
                std::vector<float> one(static_cast<std::size_t>(rows));
                for (std::int64_t s = 0; s < xs; ++s) {
                    cpu::matmul(x.data() + s * cols, 1, w.m, one.data(), pool);
                    for (std::int64_t o = 0; o < rows; ++o) CHECK(one[o] == y[s * rows + o]);
                }
            }
    }
    cpu::set_isa(cpu::best_isa());
}

TEST_CASE("f16 and bf16 widening is exact") {
    CHECK(model::bf16_to_f32(0x3f80) == 1.0f);
    CHECK(model::bf16_to_f32(0xc000) == -2.0f);
    CHECK(model::f16_to_f32(0x3c00) == 1.0f);
    CHECK(model::f16_to_f32(0xc000) == -2.0f);
    CHECK(model::f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // subnormal
    CHECK(std::isinf(model::f16_to_f32(0x7c00)));
}

TEST_CASE("rmsnorm and the short conv follow the reference formulas") {
    std::vector<float> x{1, -2, 3, -4}, w{1, 0.5f, 2, 1}, out(4);
    cpu::rmsnorm(x.data(), w.data(), 0.0, 4, out.data());
    const float r = 1.0f / std::sqrt(7.5f);
    CHECK(out[1] == doctest::Approx(-2 * r * 0.5f));
    CHECK(out[2] == doctest::Approx(3 * r * 2));
}

TEST_CASE("rmsnorm_rows gives each row rmsnorm's bits, in place or not, on any thread count") {
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    for (std::int64_t n : {64, 1024}) {
        const std::int64_t rows = 40;  // 40 × 1,024 values go to the pool, 40 × 64 stay on the caller
        std::vector<float> x(static_cast<std::size_t>(rows * n)), w(static_cast<std::size_t>(n)), want(x.size());
        for (auto& v : x) v = u(rng);
        for (auto& v : w) v = u(rng);
        for (std::int64_t r = 0; r < rows; ++r) cpu::rmsnorm(x.data() + r * n, w.data(), 1e-6, n, want.data() + r * n);
        for (unsigned threads : {1u, 2u, 3u}) {
            CAPTURE(n);
            CAPTURE(threads);
            cpu::ThreadPool pool(threads);
            std::vector<float> out(x.size()), in_place = x;
            cpu::rmsnorm_rows(x.data(), w.data(), 1e-6, n, rows, out.data(), pool);
            cpu::rmsnorm_rows(in_place.data(), w.data(), 1e-6, n, rows, in_place.data(), pool);
            CHECK(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(in_place.data(), want.data(), out.size() * sizeof(float)) == 0);
        }
    }
}

// Decode attention's kernels (engine/forward/attention.cpp): one call over a run of positions
// must give each element the bits of position-by-position calls, on every ISA, and on x86
// those of the plain loop — the product rounded before the sum. (An AVX-512 version once let
// the compiler fuse the two into an FMA: the logits moved by 6e-6 and no tolerance-based test
// saw it.) ARM64's compilers fuse the plain loop themselves, so there the loop is not the
// reference.
TEST_CASE("axpys and dots give the bits of a call a row, and on x86 the plain loop's, on every ISA") {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (cpu::Isa isa : cpu::isas()) {
        if (!cpu::isa_supported(isa)) continue;
        cpu::set_isa(isa);
        CAPTURE(std::string(cpu::isa_name(isa)));
        for (std::int64_t n : {1, 15, 16, 17, 50, 64, 65, 128, 130}) {
            const std::int64_t rows = 37, stride = n + 3;
            std::vector<float> x(static_cast<std::size_t>(rows * stride)), a(static_cast<std::size_t>(rows)),
                q(static_cast<std::size_t>(n)), y0(static_cast<std::size_t>(n));
            for (auto& v : x) v = u(rng);
            for (auto& v : a) v = u(rng);
            for (auto& v : q) v = u(rng);
            for (auto& v : y0) v = u(rng);
            CAPTURE(n);
            // The loop, with each product stored before it is added, as a reference
            // (x86-64 compiles it to separate multiplies and adds).
            std::vector<float> loop = y0, one = y0, many = y0;
            for (std::int64_t r = 0; r < rows; ++r) {
                for (std::int64_t i = 0; i < n; ++i) {
                    volatile float p = a[r] * x[r * stride + i];
                    loop[i] = loop[i] + p;
                }
                cpu::axpys(a.data() + r, x.data() + r * stride, stride, 1, n, one.data());
            }
            cpu::axpys(a.data(), x.data(), stride, rows, n, many.data());
            CHECK(std::memcmp(one.data(), many.data(), n * sizeof(float)) == 0);
#if defined(__x86_64__)
            CHECK(std::memcmp(loop.data(), many.data(), n * sizeof(float)) == 0);
#endif
            std::vector<float> d(static_cast<std::size_t>(rows));
            cpu::dots(q.data(), x.data(), stride, rows, n, d.data());
            for (std::int64_t r = 0; r < rows; ++r) {
                const float want = cpu::dot(q.data(), x.data() + r * stride, n);
                CHECK(std::memcmp(&want, &d[static_cast<std::size_t>(r)], sizeof(float)) == 0);
            }
            // Short calls (1, 3 and 6 rows: fewer than a kernel that takes rows in fours would
            // step, and a step plus some) give the long call's bits.
            for (std::int64_t few : {1, 3, 6}) {
                std::vector<float> e(static_cast<std::size_t>(few));
                cpu::dots(q.data(), x.data(), stride, few, n, e.data());
                CHECK(std::memcmp(e.data(), d.data(), static_cast<std::size_t>(few) * sizeof(float)) == 0);
            }
        }
    }
    cpu::set_isa(cpu::best_isa());
}
