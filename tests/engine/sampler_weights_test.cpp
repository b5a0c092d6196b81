// The sampler's softmax weights (engine/sampling/weights.h) and its top-k / top-p cuts,
// against std::exp and against a brute-force rendering of the cuts: every id sorted most
// probable first (ties: lower id), the k best kept, then the shortest prefix whose mass
// reaches top_p.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/sampling/sampler.h"
#include "engine/sampling/weights.h"

using namespace inkling::sampling;

namespace {

std::vector<float> weights_of(const std::vector<float>& logits, double temperature) {
    const float mx = *std::max_element(logits.begin(), logits.end(), [](float a, float b) {
        return std::isnan(a) || (!std::isnan(b) && a < b);
    });
    std::vector<float> w(logits.size());
    softmax_weights(logits, mx, static_cast<float>(1.0 / temperature), w);
    return w;
}

// Ids most probable first (ties: lower id first).
std::vector<std::int32_t> ranked(const std::vector<float>& w) {
    std::vector<std::int32_t> order(w.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return w[a] > w[b]; });
    return order;
}

std::set<std::int32_t> drawn(const Params& p, const std::vector<float>& logits, int n) {
    Sampler s(p);
    std::set<std::int32_t> out;
    for (int i = 0; i < n; ++i) out.insert(s.next(logits, {}));
    return out;
}

// The ids most probable first and each prefix's share of the whole mass; a top_p between the
// masses of the prefixes of keep - 1 and keep ids (so that one prefix is the set whatever
// the summation order).
struct Prefixes {
    std::vector<std::int32_t> order;
    std::vector<double> share;
    double total = 0.0;
    double top_p_keeping(std::size_t keep) const {
        return keep == 1 ? share[0] / 2 : (share[keep - 2] + share[keep - 1]) / 2;
    }
};
Prefixes prefixes(const std::vector<float>& w) {
    Prefixes p{ranked(w), std::vector<double>(w.size()), 0.0};
    for (float x : w) p.total += x;
    double acc = 0.0;
    for (std::size_t i = 0; i < w.size(); ++i) p.share[i] = (acc += w[p.order[i]]) / p.total;
    return p;
}

std::vector<float> random_logits(std::size_t n, std::uint32_t seed, float spread) {
    std::mt19937 g(seed);
    std::normal_distribution<float> nd(0.0f, spread);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(g);
    return v;
}

}  // namespace

TEST_CASE("the weights' exp is within 2 ulp of std::exp, and 0 below -87, at -inf and for NaN") {
    double worst = 0.0;
    for (int i = 0; i <= 870000; ++i) {
        const float x = -static_cast<float>(i) * 1e-4f;
        const double want = std::exp(static_cast<double>(x));
        const double got = exp_nonpositive(x);
        worst = std::max(worst, std::abs(got - want) / want);
    }
    INFO("worst relative error ", worst);
    CHECK(worst < 2.4e-7);  // 2 ulp of a float
    CHECK(exp_nonpositive(0.0f) == 1.0f);
    CHECK(exp_nonpositive(-0.0f) == 1.0f);
    CHECK(exp_nonpositive(-87.5f) == 0.0f);
    CHECK(exp_nonpositive(-1e30f) == 0.0f);
    CHECK(exp_nonpositive(-INFINITY) == 0.0f);
    CHECK(exp_nonpositive(std::nanf("")) == 0.0f);
    CHECK(std::isnormal(exp_nonpositive(-86.99f)));
}

TEST_CASE("softmax_weights gives exp_nonpositive's bits in its vector loop and its tail") {
    for (std::size_t n : {1u, 3u, 4u, 15u, 16u, 17u, 64u, 1001u}) {
        std::vector<float> logits = random_logits(n, static_cast<std::uint32_t>(n), 20.0f);
        logits[n / 2] = -INFINITY;
        if (n > 2) logits[1] = std::nanf("");
        const float mx = 9.0f, inv_t = 1.0f / 0.7f;
        std::vector<float> w(n);
        softmax_weights(logits, mx, inv_t, w);
        for (std::size_t i = 0; i < n; ++i) {
            INFO("n ", n, " i ", i);
            CHECK(std::bit_cast<std::uint32_t>(w[i]) == std::bit_cast<std::uint32_t>(exp_nonpositive((logits[i] - mx) * inv_t)));
        }
    }
}

TEST_CASE("sum_weights adds in eight lanes, then a fixed tree") {
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 100u, 4099u}) {
        std::vector<float> w(n);
        for (std::size_t i = 0; i < n; ++i) w[i] = std::ldexp(1.0f + static_cast<float>(i % 13) / 7.0f, -static_cast<int>(i % 30));
        double lane[8] = {};
        for (std::size_t i = 0; i < n; ++i) lane[i % 8] += w[i];
        const double want = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        CHECK(sum_weights(w) == want);
    }
}

TEST_CASE("top-k draws exactly the ids of the k largest logits, ties to the lower id") {
    for (std::size_t n : {5u, 300u, 20000u}) {
        std::vector<float> logits = random_logits(n, 11, 2.0f);
        for (std::size_t i = 0; i + 3 < n; i += 4) logits[i + 1] = logits[i];  // ties everywhere
        logits[n - 1] = -INFINITY;
        for (std::uint32_t k : {1u, 2u, 4u}) {
            const auto order = ranked(logits);
            const std::set<std::int32_t> want(order.begin(), order.begin() + k);
            INFO("n ", n, " k ", k);
            CHECK(drawn({.temperature = 1.0, .top_k = k, .seed = 3}, logits, 400) == want);
        }
    }
    // Equal logits: the lowest ids.
    CHECK(drawn({.temperature = 1.0, .top_k = 3, .seed = 9}, std::vector<float>(50, 0.25f), 300) ==
          std::set<std::int32_t>{0, 1, 2});
}

TEST_CASE("top-p draws exactly the shortest most-probable prefix reaching the mass") {
    // Flat rows (the cut deep in the vocabulary, past many buckets) and peaked ones; top_p
    // between two prefixes' masses, so the set is one prefix whatever the summation order.
    for (float spread : {0.3f, 3.0f}) {
        for (std::size_t n : {40u, 3000u}) {
            std::vector<float> logits = random_logits(n, 5, spread);
            for (std::size_t i = 0; i + 5 < n; i += 5) logits[i + 3] = logits[i];  // ties
            for (double temperature : {0.7, 1.3}) {
                const auto w = weights_of(logits, temperature);
                const Prefixes p = prefixes(w);
                const auto& order = p.order;
                for (std::size_t keep : {std::size_t{1}, std::size_t{2}, n / 8, n / 2}) {
                    const double top_p = p.top_p_keeping(keep);
                    const std::set<std::int32_t> want(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
                    const int draws = 60 * static_cast<int>(keep) + 200;
                    const std::set<std::int32_t> got = drawn({.temperature = temperature, .top_p = top_p, .seed = 17}, logits, draws);
                    INFO("spread ", spread, " n ", n, " T ", temperature, " keep ", keep);
                    CHECK(std::includes(want.begin(), want.end(), got.begin(), got.end()));
                    CHECK(got.count(order[0]) == 1);
                    // Every kept id drawn, where even the least of them expects 15 draws or more.
                    const double least = w[order[keep - 1]] / (p.share[keep - 1] * p.total);
                    if (least * draws >= 15) CHECK(got == want);
                }
            }
        }
    }
}

TEST_CASE("top-p over near-equal logits (one bucket of thousands of ids) keeps the exact prefix") {
    // Logits within 0.002 of each other, many equal: the cut's bucket is most of the row.
    const std::size_t n = 8000;
    std::vector<float> logits(n);
    std::mt19937 g(41);
    std::uniform_int_distribution<int> level(0, 400);
    for (auto& x : logits) x = 0.5f + static_cast<float>(level(g)) * 5e-6f;
    const Prefixes p = prefixes(weights_of(logits, 1.0));
    for (std::size_t keep : {std::size_t{1}, std::size_t{2}, std::size_t{600}}) {
        const double top_p = p.top_p_keeping(keep);
        const std::set<std::int32_t> want(p.order.begin(), p.order.begin() + static_cast<std::ptrdiff_t>(keep));
        INFO("keep ", keep);
        CHECK(drawn({.temperature = 1.0, .top_p = top_p, .seed = 43}, logits, 60 * static_cast<int>(keep) + 200) == want);
    }
}

TEST_CASE("top-p draws follow the kept ids' renormalized weights") {
    // Four ids of mass 0.4, 0.3, 0.2, 0.1 among 5,000 of almost none; top_p 0.85 keeps the
    // first three (0.9 of the whole), each drawn in proportion 4:3:2.
    std::vector<float> logits(5000, -40.0f);
    logits[4000] = std::log(0.4f);
    logits[17] = std::log(0.3f);
    logits[2500] = std::log(0.2f);
    logits[999] = std::log(0.1f);
    Sampler s({.temperature = 1.0, .top_p = 0.85, .seed = 23});
    std::map<std::int32_t, int> count;
    const int n = 30000;
    for (int i = 0; i < n; ++i) ++count[s.next(logits, {})];
    CHECK(count.size() == 3);
    CHECK(std::abs(count[4000] / double(n) - 4.0 / 9) < 0.015);
    CHECK(std::abs(count[17] / double(n) - 3.0 / 9) < 0.015);
    CHECK(std::abs(count[2500] / double(n) - 2.0 / 9) < 0.015);
}

TEST_CASE("draws over a large vocabulary follow the softmax") {
    // 100,000 ids in 4 groups of weights 1:2:3:4 (a draw walks blocks of ids, then one block).
    std::vector<float> logits(100000);
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::log(static_cast<float>(i % 4 + 1));
    Sampler s({.temperature = 1.0, .seed = 31});
    int count[4] = {};
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++count[s.next(logits, {}) % 4];
    for (int g = 0; g < 4; ++g) CHECK(std::abs(count[g] / double(n) - (g + 1) / 10.0) < 0.012);
}

TEST_CASE("degenerate rows: tiny and huge temperatures, infinities, NaNs") {
    const std::vector<float> row{0.5f, 2.0f, 1.0f, 2.0f - 1e-6f};
    for (auto t : drawn({.temperature = 1e-30, .seed = 1}, row, 50)) CHECK(t == 1);
    CHECK(drawn({.temperature = 1e30, .seed = 1}, row, 400).size() == 4);  // all equally likely
    CHECK(drawn({.temperature = 1.0, .seed = 2}, {0.0f, INFINITY, 3.0f}, 50) == std::set<std::int32_t>{1});
    CHECK(drawn({.temperature = 1.0, .seed = 2}, {-INFINITY, 1.0f, -INFINITY}, 50) == std::set<std::int32_t>{1});
    const float nan = std::nanf("");
    CHECK(drawn({.temperature = 1.0, .seed = 4}, {nan, 0.0f, nan, 0.5f}, 200) == std::set<std::int32_t>{1, 3});
    CHECK(drawn({.temperature = 1.0, .top_p = 0.5, .seed = 4}, {nan, 0.0f, nan, 3.0f}, 100) == std::set<std::int32_t>{3});
    CHECK(drawn({.temperature = 1.0, .top_k = 1, .seed = 4}, {nan, 0.0f, nan, 3.0f}, 100) == std::set<std::int32_t>{3});
    CHECK(drawn({.temperature = 1.0, .seed = 4}, {nan, nan}, 10) == std::set<std::int32_t>{0});
    // top_k at or past the vocabulary is no cut: the same draws as none.
    const auto logits = random_logits(500, 2, 1.0f);
    Sampler a({.temperature = 0.9, .top_k = 500, .seed = 8}), b({.temperature = 0.9, .seed = 8});
    for (int i = 0; i < 100; ++i) CHECK(a.next(logits, {}) == b.next(logits, {}));
}

TEST_CASE("log_sum_exp agrees with a double-precision sum, and handles infinities and NaNs") {
    for (std::size_t n : {1u, 5u, 2047u, 2048u, 2049u, 201024u}) {
        for (float spread : {0.5f, 8.0f}) {
            const auto v = random_logits(n, static_cast<std::uint32_t>(n), spread);
            const double mx = *std::max_element(v.begin(), v.end());
            double total = 0.0;
            for (float x : v) total += std::exp(static_cast<double>(x) - mx);
            INFO("n ", n, " spread ", spread);
            CHECK(std::abs(log_sum_exp(v) - (mx + std::log(total))) < 1e-6);
        }
    }
    CHECK(log_sum_exp(std::vector<float>{}) == -INFINITY);
    CHECK(log_sum_exp(std::vector<float>{-INFINITY, -INFINITY}) == -INFINITY);
    CHECK(log_sum_exp(std::vector<float>{1.0f, INFINITY}) == INFINITY);
    CHECK(std::abs(log_sum_exp(std::vector<float>{std::nanf(""), 0.0f, -INFINITY, 0.0f}) - std::log(2.0)) < 1e-7);
}

TEST_CASE("largest gives the k largest indices, largest first, ties to the lower index, no NaNs") {
    for (std::size_t n : {0u, 1u, 7u, 100u, 201024u}) {
        std::vector<float> v = random_logits(n, static_cast<std::uint32_t>(n + 1), 1.0f);
        for (std::size_t i = 0; i + 7 < n; i += 7) v[i + 3] = v[i];  // ties
        for (std::size_t i = 5; i < n; i += 11) v[i] = std::nanf("");
        if (n > 2) v[0] = std::nanf("");
        std::vector<std::int32_t> numbers;
        for (std::size_t i = 0; i < n; ++i)
            if (!std::isnan(v[i])) numbers.push_back(static_cast<std::int32_t>(i));
        std::stable_sort(numbers.begin(), numbers.end(), [&](std::int32_t a, std::int32_t b) { return v[a] > v[b]; });
        for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{20}, n, n + 3}) {
            const std::vector<std::int32_t> want(numbers.begin(), numbers.begin() + static_cast<std::ptrdiff_t>(std::min(k, numbers.size())));
            INFO("n ", n, " k ", k);
            CHECK(largest(v, k) == want);
        }
    }
    CHECK(largest(std::vector<float>{2, 5, 5, 1, 5}, 2) == std::vector<std::int32_t>{1, 2});
    CHECK(largest(std::vector<float>{-INFINITY, INFINITY, 0}, 3) == std::vector<std::int32_t>{1, 2, 0});
}
