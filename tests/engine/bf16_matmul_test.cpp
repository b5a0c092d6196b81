// matmul on bf16 weights in both numerics modes, against a plain scalar rendering of the
// order engine/cpu/bf16_matmul.h promises (bf16 rounding spelled out here, not borrowed):
// bitwise on every ISA and kernel (FMA tiles, vdpbf16ps tiles, AVX2, scalar), for edge
// shapes (columns not a multiple of 32, rows not a multiple of the tile, n = 1, 2, 3, 5, 7, 8,
// 17, 64, strided rows, shapes past the L1/L2 blocking), each row bitwise the same alone
// or in any batch and for any thread count; and close to the double-precision product.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/bf16_matmul.h"
#include "engine/cpu/kernels.h"
#if defined(__x86_64__)
#include "engine/cpu/simd.h"
#endif

using namespace inkling;
using model::DType;

namespace {

std::uint32_t bits_of(float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
}

float float_of(std::uint32_t b) {
    float v;
    std::memcpy(&v, &b, 4);
    return v;
}

// Round to nearest even at bit 16; zeros and subnormals keep only the sign; NaN quiet.
std::uint16_t ref_round(float v) {
    const std::uint32_t b = bits_of(v);
    const std::uint32_t exponent = (b >> 23) & 0xff, mantissa = b & 0x7fffff;
    if (exponent == 0) return static_cast<std::uint16_t>((b >> 31) << 15);
    if (exponent == 0xff && mantissa != 0) return static_cast<std::uint16_t>((b >> 16) | 0x40);
    const std::uint32_t keep = b >> 16, rest = b & 0xffff;
    const bool up = rest > 0x8000 || (rest == 0x8000 && (keep & 1));
    return static_cast<std::uint16_t>(keep + (up ? 1 : 0));
}

float widen(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }

// The promised order, element by element.
float ref_element(const std::uint16_t* w, std::int64_t cols, const float* x, bool round) {
    auto wv = [&](std::int64_t i) { return i < cols ? widen(w[i]) : 0.0f; };
    auto xv = [&](std::int64_t i) { return i < cols ? (round ? widen(ref_round(x[i])) : x[i]) : 0.0f; };
    float acc[16] = {};
    for (std::int64_t c = 0; c * 32 < cols; ++c)
        for (int j = 0; j < 16; ++j) {
            const std::int64_t i = 32 * c + 2 * j;
            acc[j] = std::fma(wv(i + 1), xv(i + 1), acc[j]);
            acc[j] = std::fma(wv(i), xv(i), acc[j]);
        }
    for (int h = 8; h > 0; h /= 2)
        for (int i = 0; i < h; ++i) acc[i] = acc[i] + acc[i + h];
    return acc[0];
}

struct Weights {
    std::vector<std::uint16_t> h;
    model::Matrix m;
};

// Values over a few binades, signs mixed, some exact zeros; a NaN in the stride padding
// (never read).
Weights make_weights(std::int64_t rows, std::int64_t cols, std::int64_t stride, std::mt19937& rng) {
    std::normal_distribution<float> g(0, 1);
    Weights w;
    w.h.assign(static_cast<std::size_t>(rows * stride), 0x7fc0);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            w.h[static_cast<std::size_t>(r * stride + c)] = rng() % 17 == 0 ? 0 : ref_round(g(rng));
    w.m = {reinterpret_cast<const std::byte*>(w.h.data()), DType::BF16, rows, cols, stride};
    return w;
}

std::vector<float> make_x(std::int64_t n, std::int64_t cols, std::mt19937& rng) {
    std::normal_distribution<float> g(0, 1);
    std::vector<float> x(static_cast<std::size_t>(n * cols));
    for (auto& v : x) v = g(rng) * (rng() % 3 == 0 ? 8.0f : 1.0f);
    return x;
}

std::vector<float> run(const float* x, std::int64_t n, const model::Matrix& w, cpu::ThreadPool& pool) {
    std::vector<float> y(static_cast<std::size_t>(n * w.rows), NAN);
    cpu::matmul(x, n, w, y.data(), pool);
    return y;
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Every kernel this CPU can run: (ISA, vdpbf16ps on?) — the dot product only counts in
// bf16 mode on the Avx512 ISA.
struct Variant {
    cpu::Isa isa;
    bool dot;
    std::string name() const { return std::string(cpu::isa_name(isa)) + (dot ? "+dpbf16" : ""); }
};

std::vector<Variant> variants() {
    std::vector<Variant> out;
    for (cpu::Isa isa : cpu::isas()) {
        if (!cpu::isa_supported(isa)) {
            MESSAGE("skipping ISA " << std::string(cpu::isa_name(isa)) << ": this CPU lacks it");
            continue;
        }
        out.push_back({isa, false});
        if (isa == cpu::Isa::Avx512 && cpu::has_avx512_bf16()) out.push_back({isa, true});
    }
    if (!cpu::has_avx512_bf16()) MESSAGE("no AVX-512 BF16: the vdpbf16ps kernel is not tested here");
    return out;
}

// Sets the variant and numerics for a scope; restores the defaults after.
struct Use {
    Use(const Variant& v, cpu::Numerics numerics) {
        cpu::set_isa(v.isa);
        cpu::set_bf16_dot_product(v.dot);
        cpu::set_numerics(numerics);
    }
    ~Use() {
        cpu::set_isa(cpu::best_isa());
        cpu::set_bf16_dot_product(saved_dot);
        cpu::set_numerics(cpu::Numerics::Exact);
    }
    bool saved_dot = cpu::bf16_dot_product_active();
};

const cpu::Numerics kModes[] = {cpu::Numerics::Exact, cpu::Numerics::Bf16};

}  // namespace

TEST_CASE("bf16 rounding of activations: to nearest even, subnormals to zero, NaN quiet") {
    const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f /* tie, even: down */,
                              1.01171875f /* tie, odd: up */, 1.0039063f, std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                              -1e-39f, std::numeric_limits<float>::min(), std::nanf(""), float_of(0x7f800001),
                              float_of(0xff812345), 3.3895314e38f};
    for (float v : specials) {
        CAPTURE(bits_of(v));
        CHECK(cpu::round_to_bf16(v) == ref_round(v));
    }
    CHECK(cpu::round_to_bf16(1.00390625f) == 0x3f80);
    CHECK(cpu::round_to_bf16(1.01171875f) == 0x3f82);
    CHECK(cpu::round_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to infinity
    std::mt19937 rng(1);
    for (int i = 0; i < 200000; ++i) {
        const float v = float_of(static_cast<std::uint32_t>(rng()));
        CAPTURE(bits_of(v));
        REQUIRE(cpu::round_to_bf16(v) == ref_round(v));
    }
}

#if defined(__x86_64__)
namespace {
__attribute__((target("avx512f,avx512bf16,avx512vl"))) std::uint16_t hardware_round(float v) {
    const __m128bh r = _mm_cvtneps_pbh(_mm_set1_ps(v));
    std::uint16_t out[8];
    std::memcpy(out, &r, sizeof out);
    return out[0];
}
__attribute__((target("avx512f,avx512bf16,avx512vl"))) float hardware_dot(const std::uint16_t* w, const std::uint16_t* x,
                                                                          float acc) {
    __m128bh wv, xv;
    std::memcpy(&wv, w, 16);
    std::memcpy(&xv, x, 16);
    return _mm_cvtss_f32(_mm_dpbf16_ps(_mm_set1_ps(acc), wv, xv));
}
}  // namespace

TEST_CASE("the reference's rounding and chunk step are what vcvtneps2bf16 and vdpbf16ps compute") {
    if (!cpu::has_avx512_bf16()) {
        MESSAGE("no AVX-512 BF16 on this CPU");
        return;
    }
    std::mt19937 rng(2);
    for (int i = 0; i < 100000; ++i) {
        const float v = float_of(static_cast<std::uint32_t>(rng()));
        CAPTURE(bits_of(v));
        REQUIRE(hardware_round(v) == ref_round(v));
    }
    // One lane: acc = fma(w1, x1, acc); acc = fma(w0, x0, acc) — the odd element first.
    std::normal_distribution<float> g(0, 1);
    int checked = 0;
    for (int i = 0; i < 100000; ++i) {
        std::uint16_t w[8] = {ref_round(g(rng)), ref_round(g(rng))}, x[8] = {ref_round(g(rng)), ref_round(g(rng))};
        const float acc = g(rng) * 4;
        const float want = std::fma(widen(w[0]), widen(x[0]), std::fma(widen(w[1]), widen(x[1]), acc));
        CAPTURE(i);
        REQUIRE(bits_of(hardware_dot(w, x, acc)) == bits_of(want));
        ++checked;
    }
    CHECK(checked == 100000);
}
#endif

TEST_CASE("bf16 matmul: every ISA and kernel bitwise equals the reference order, both numerics") {
    std::mt19937 rng(3);
    cpu::ThreadPool pool(2);
    struct Shape {
        std::int64_t rows, cols, stride, n;
    };
    // Columns: 1, < 32, 32 ± 1, not a multiple of 32, past the tiles' L1 slice (1024 f32 /
    // 2048 bf16 columns); rows: not a multiple of 3, 4 or 8, past an L2 block; n: 1, 2, 3, 5,
    // 7 and 8 (the one wide streaming tile), 17 (2 tiles + 5), 64. n = 1 over many rows: the
    // decode order (rows in 4 or 8 parts a thread, a tile taking one row of each) with rows
    // left over, padded rows and a partial last chunk.
    const Shape shapes[] = {{7, 1, 1, 1},      {9, 15, 16, 2},     {13, 31, 31, 3},   {5, 32, 40, 5},
                            {33, 33, 33, 17},  {19, 100, 100, 64}, {70, 257, 300, 6}, {11, 2100, 2100, 7},
                            {290, 1056, 1056, 13}, {3, 64, 64, 1},  {8, 4100, 4100, 2}, {37, 1100, 1200, 8},
                            {2, 40, 40, 8},    {37, 1100, 1200, 1}, {291, 1024, 1024, 1}, {64, 33, 40, 1}};
    for (const Shape& sh : shapes) {
        const Weights w = make_weights(sh.rows, sh.cols, sh.stride, rng);
        const auto x = make_x(sh.n, sh.cols, rng);
        for (cpu::Numerics mode : kModes) {
            std::vector<float> want(static_cast<std::size_t>(sh.n * sh.rows));
            for (std::int64_t s = 0; s < sh.n; ++s)
                for (std::int64_t o = 0; o < sh.rows; ++o)
                    want[static_cast<std::size_t>(s * sh.rows + o)] =
                        ref_element(w.h.data() + o * sh.stride, sh.cols, x.data() + s * sh.cols,
                                    mode == cpu::Numerics::Bf16);
            for (const Variant& v : variants()) {
                if (v.dot && mode == cpu::Numerics::Exact) continue;  // vdpbf16ps needs bf16 activations
                Use use(v, mode);
                std::string variant = v.name(), numerics = cpu::numerics_name(mode);
                CAPTURE(variant);
                CAPTURE(numerics);
                CAPTURE(sh.rows);
                CAPTURE(sh.cols);
                CAPTURE(sh.n);
                // A decode step's rows (1-8: one session or a batch of them): both orders of
                // the weight rows (bf16_decode_interleave_active).
                const bool saved_interleave = cpu::bf16_decode_interleave_active();
                for (bool interleave : {false, true}) {
                    if (sh.n > 8 && interleave != saved_interleave) continue;
                    cpu::set_bf16_decode_interleave(interleave);
                    CAPTURE(interleave);
                    const auto y = run(x.data(), sh.n, w.m, pool);
                    std::size_t bad = 0;
                    for (std::size_t i = 0; i < y.size(); ++i) bad += bits_of(y[i]) != bits_of(want[i]);
                    CHECK(bad == 0);
                }
                cpu::set_bf16_decode_interleave(saved_interleave);
            }
        }
    }
}

TEST_CASE("bf16 matmul is close to the double-precision product (exact: f32 rounding; bf16: activation rounding)") {
    std::mt19937 rng(4);
    cpu::ThreadPool pool(2);
    const std::int64_t rows = 37, cols = 1000, n = 9;
    const Weights w = make_weights(rows, cols, cols, rng);
    const auto x = make_x(n, cols, rng);
    for (cpu::Numerics mode : kModes) {
        Use use({cpu::best_isa(), false}, mode);
        const auto y = run(x.data(), n, w.m, pool);
        double worst_exact = 0, worst_rounded = 0;
        for (std::int64_t s = 0; s < n; ++s)
            for (std::int64_t o = 0; o < rows; ++o) {
                double want = 0, want_rounded = 0, magnitude = 0;
                for (std::int64_t i = 0; i < cols; ++i) {
                    const double wi = widen(w.h[static_cast<std::size_t>(o * cols + i)]);
                    const float xi = x[static_cast<std::size_t>(s * cols + i)];
                    want += wi * xi;
                    want_rounded += wi * widen(ref_round(xi));
                    magnitude += std::fabs(wi * xi);
                }
                const double got = y[static_cast<std::size_t>(s * rows + o)];
                worst_exact = std::max(worst_exact, std::fabs(got - want) / magnitude);
                worst_rounded = std::max(worst_rounded, std::fabs(got - want_rounded) / magnitude);
            }
        // f32 sums of ~cols/16 terms a lane: a few 2^-24 each, far below 1e-5 of Σ|w·x|;
        // rounding the activations moves each product by at most 2^-9 relative.
        if (mode == cpu::Numerics::Exact) CHECK(worst_exact < 1e-5);
        else {
            CHECK(worst_rounded < 1e-5);
            CHECK(worst_exact < 1.0 / 256);
        }
    }
}

TEST_CASE("bf16 matmul: each row bitwise the same alone, in any batch and for any thread count") {
    std::mt19937 rng(5);
    const std::int64_t rows = 301, cols = 1090;
    const Weights w = make_weights(rows, cols, cols, rng);
    const auto x = make_x(64, cols, rng);
    for (const Variant& v : variants())
        for (cpu::Numerics mode : kModes) {
            if (v.dot && mode == cpu::Numerics::Exact) continue;
            Use use(v, mode);
            std::string variant = v.name(), numerics = cpu::numerics_name(mode);
            CAPTURE(variant);
            CAPTURE(numerics);
            cpu::ThreadPool one(1);
            std::vector<std::vector<float>> solo;
            for (std::int64_t s = 0; s < 64; ++s) solo.push_back(run(x.data() + s * cols, 1, w.m, one));
            for (unsigned threads : {1u, 2u, 3u}) {
                cpu::ThreadPool pool(threads);
                for (std::int64_t n : {1, 2, 3, 5, 6, 7, 17, 64}) {
                    if (v.isa == cpu::Isa::Scalar && n > 7 && threads != 2) continue;  // slow, and covered
                    CAPTURE(threads);
                    CAPTURE(n);
                    // A window of the batch that does not start at row 0.
                    const std::int64_t first = n == 64 ? 0 : 3;
                    const auto y = run(x.data() + first * cols, n, w.m, pool);
                    for (std::int64_t s = 0; s < n; ++s)
                        CHECK(same_bits(y.data() + s * rows, solo[static_cast<std::size_t>(first + s)].data(),
                                        static_cast<std::size_t>(rows)));
                }
            }
        }
}

TEST_CASE("bf16 matmul_group: jobs sharing activations, bf16 next to f32 weights, each as matmul alone") {
    std::mt19937 rng(6);
    cpu::ThreadPool pool(2);
    const std::int64_t cols = 200, n = 5;
    const Weights a = make_weights(64, cols, cols, rng), b = make_weights(23, cols, cols + 8, rng);
    std::vector<float> wf(static_cast<std::size_t>(16 * cols));
    for (std::size_t i = 0; i < wf.size(); ++i) wf[i] = widen(a.h[i]);
    const model::Matrix mf{reinterpret_cast<const std::byte*>(wf.data()), DType::F32, 16, cols, cols};
    const auto x = make_x(n, cols, rng), x2 = make_x(2, cols, rng);
    for (cpu::Numerics mode : kModes) {
        Use use({cpu::best_isa(), false}, mode);
        std::vector<float> ya(n * 64), yb(n * 23), yf(n * 16), yb2(2 * 23);
        const cpu::MatJob jobs[] = {{x.data(), n, &a.m, ya.data()},
                                    {x.data(), n, &mf, yf.data()},
                                    {x.data(), n, &b.m, yb.data()},
                                    {x2.data(), 2, &b.m, yb2.data()}};
        cpu::matmul_group(jobs, pool);
        CHECK(ya == run(x.data(), n, a.m, pool));
        CHECK(yf == run(x.data(), n, mf, pool));
        CHECK(yb == run(x.data(), n, b.m, pool));
        CHECK(yb2 == run(x2.data(), 2, b.m, pool));
        // f32 weights do not change with the mode: activations stay exact for them.
        cpu::set_numerics(cpu::Numerics::Exact);
        CHECK(yf == run(x.data(), n, mf, pool));
    }
}

TEST_CASE("numerics names parse and print") {
    CHECK(cpu::parse_numerics("exact") == cpu::Numerics::Exact);
    CHECK(cpu::parse_numerics("bf16") == cpu::Numerics::Bf16);
    CHECK(std::string(cpu::numerics_name(cpu::Numerics::Bf16)) == "bf16");
    CHECK_THROWS_AS(cpu::parse_numerics("fp8"), std::runtime_error);
    CHECK(cpu::active_numerics() == cpu::Numerics::Exact);  // the default
    if (!cpu::has_avx512_bf16()) CHECK_THROWS_AS(cpu::set_bf16_dot_product(true), std::runtime_error);
}
