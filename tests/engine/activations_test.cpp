// The forward's pointwise nonlinearities (engine/cpu/activations.h): sigmoid and SiLU
// against double-precision std::exp, their special values, and SwiGLU's vectorized loops
// (strided and in place, on every ISA this CPU has) bit for bit against the scalar functions.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/activations.h"
#include "engine/cpu/kernels.h"

using namespace inkling;

namespace {

double sigmoid_exact(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Distance in units of the last place of `want` (as a float).
double ulps(float got, double want) {
    const float w = static_cast<float>(want);
    const float ulp = std::nextafter(std::fabs(w), std::numeric_limits<float>::infinity()) - std::fabs(w);
    return std::fabs(static_cast<double>(got) - want) / ulp;
}

std::vector<float> sweep() {
    std::vector<float> v;
    for (float x = -90.0f; x <= 90.0f; x += 0.0173f) v.push_back(x);
    for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -1e-8f, 0.5f, -0.5f, 20.0f, -20.0f}) v.push_back(x);
    return v;
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

// Runs fn(isa) with each ISA this CPU has selected, then restores the best one.
template <class Fn>
void each_isa(Fn fn) {
    struct Restore {
        ~Restore() { cpu::set_isa(cpu::best_isa()); }
    } restore;
    for (cpu::Isa isa : cpu::isas()) {
        if (!cpu::isa_supported(isa)) continue;
        cpu::set_isa(isa);
        fn(isa);
    }
}

}  // namespace

TEST_CASE("sigmoid and silu are within a few ulp of the exact values") {
    double worst_sigmoid = 0, worst_silu = 0;
    for (float x : sweep()) {
        const double s = sigmoid_exact(x);
        if (s >= 1e-37) worst_sigmoid = std::max(worst_sigmoid, ulps(cpu::sigmoid(x), s));
        const double si = x * s;
        if (std::fabs(si) >= 1e-30) worst_silu = std::max(worst_silu, ulps(cpu::silu(x), si));
    }
    MESSAGE("worst sigmoid " << worst_sigmoid << " ulp, silu " << worst_silu << " ulp");
    CHECK(worst_sigmoid <= 4.0);
    CHECK(worst_silu <= 5.0);
}

TEST_CASE("sigmoid and silu at their special values") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(cpu::sigmoid(0.0f) == 0.5f);
    CHECK(cpu::sigmoid(inf) == 1.0f);
    CHECK(cpu::sigmoid(-inf) == 0.0f);
    CHECK(cpu::sigmoid(200.0f) == 1.0f);
    CHECK(cpu::sigmoid(-200.0f) == 0.0f);
    CHECK(std::isnan(cpu::sigmoid(nan)));
    CHECK(cpu::silu(0.0f) == 0.0f);
    CHECK(cpu::silu(inf) == inf);
    CHECK(cpu::silu(200.0f) == 200.0f);
    CHECK(cpu::silu(-200.0f) == 0.0f);
    CHECK(std::fabs(cpu::silu(-88.0f)) < 1e-35f);  // flushed where e^v leaves the normal floats
    CHECK(std::isnan(cpu::silu(nan)));
    // Monotone through the sign change, where the formula switches branches.
    float prev = cpu::sigmoid(-1e-3f);
    for (float x = -1e-3f; x <= 1e-3f; x += 1e-5f) {
        CHECK(cpu::sigmoid(x) >= prev);
        prev = cpu::sigmoid(x);
    }
}

TEST_CASE("swiglu's loops give the scalar functions' bits on every ISA, strided and in place") {
    std::mt19937 rng(7);
    std::normal_distribution<float> g(0.0f, 4.0f);
    each_isa([&](cpu::Isa isa) {
        const std::string isa_text = cpu::isa_name(isa);
        CAPTURE(isa_text);
        for (std::int64_t n : {1, 5, 63, 64, 65, 200, 2560}) {
            CAPTURE(n);
            std::vector<float> buf(static_cast<std::size_t>(2 * n));
            for (auto& v : buf) v = g(rng);
            buf[0] = std::numeric_limits<float>::quiet_NaN();
            if (n > 3) buf[3] = -std::numeric_limits<float>::infinity();
            // [g0 u0 g1 u1 …] in place, as a fused gate_up product leaves it.
            std::vector<float> inter = buf;
            cpu::swiglu(inter.data(), inter.data() + 1, 2, n, inter.data());
            // [gates | ups] in place, and into a separate output.
            std::vector<float> split = buf, out(static_cast<std::size_t>(n));
            cpu::swiglu(split.data(), split.data() + n, 1, n, out.data());
            cpu::swiglu(split.data(), split.data() + n, 1, n, split.data());
            bool inter_ok = true, split_ok = true;
            for (std::int64_t i = 0; i < n; ++i) {
                const auto k = static_cast<std::size_t>(i);
                inter_ok = inter_ok && same_bits(inter[k], cpu::silu(buf[2 * k]) * buf[2 * k + 1]);
                const float want = cpu::silu(buf[k]) * buf[static_cast<std::size_t>(n) + k];
                split_ok = split_ok && same_bits(split[k], want) && same_bits(out[k], want);
            }
            CHECK(inter_ok);
            CHECK(split_ok);
        }
    });
}

TEST_CASE("softmax_numerators: e^(v - max) within 2 ulp, the same bits on every ISA, -inf to 0, NaN kept") {
    std::mt19937 rng(9);
    std::normal_distribution<float> g(0.0f, 6.0f);
    std::vector<float> scores(1000);
    for (auto& v : scores) v = g(rng);
    scores[10] = -std::numeric_limits<float>::infinity();
    scores[11] = std::numeric_limits<float>::quiet_NaN();
    scores[12] = -200.0f;
    float mx = -std::numeric_limits<float>::infinity();
    for (float v : scores)
        if (v == v) mx = std::max(mx, v);
    std::vector<float> first;
    each_isa([&](cpu::Isa isa) {
        const std::string isa_text = cpu::isa_name(isa);
        CAPTURE(isa_text);
        // Odd lengths reach the loops' tails.
        for (std::int64_t n : {1, 7, 999, 1000}) {
            std::vector<float> e(scores.begin(), scores.begin() + n);
            cpu::softmax_numerators(e.data(), n, mx);
            if (n == 1000 && first.empty()) first = e;
            if (n == 1000) CHECK(std::memcmp(e.data(), first.data(), e.size() * sizeof(float)) == 0);
            double worst = 0;
            for (std::int64_t i = 0; i < n; ++i) {
                const auto k = static_cast<std::size_t>(i);
                const double want = std::exp(static_cast<double>(scores[k] - mx));  // of the f32 difference
                if (k == 10 || k == 12) CHECK(e[k] == 0.0f);
                else if (k == 11) CHECK(std::isnan(e[k]));
                else if (want >= 1e-37) worst = std::max(worst, ulps(e[k], want));
            }
            CHECK(worst <= 2.0);
        }
    });
}
