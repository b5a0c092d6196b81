#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "engine/sampling/sampler.h"

using namespace inkling::sampling;

namespace {
std::vector<std::int32_t> draw(const Params& p, const std::vector<float>& logits, int n) {
    Sampler s(p);
    std::vector<std::int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back(s.next(logits, {}));
    return out;
}
}  // namespace

TEST_CASE("greedy takes the largest logit, ties to the lowest id") {
    CHECK(argmax(std::vector<float>{1, 3, 3, 2}) == 1);
    Sampler s(Params{});
    CHECK(s.next(std::vector<float>{0.5f, -1.0f, 4.0f}, {}) == 2);
}

TEST_CASE("argmax over long rows is the first index a compare-and-replace scan keeps") {
    // The plain scan argmax must agree with: best = 0, replaced only by a strictly larger
    // value (so ties go to the lowest id, NaNs never win, and a NaN first value keeps 0).
    auto scan = [](const std::vector<float>& v) {
        std::int32_t best = 0;
        for (std::size_t i = 1; i < v.size(); ++i)
            if (v[i] > v[best]) best = static_cast<std::int32_t>(i);
        return best;
    };
    const float nan = std::nanf(""), inf = INFINITY;
    std::vector<std::vector<float>> cases = {{}, {2}, {nan, 5, 7}, {-inf, -inf}, {-0.0f, 0.0f}, {-1, 0.0f, -0.0f}};
    for (std::size_t n : {15u, 16u, 17u, 33u, 200u, 32000u}) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 0.37f) * 10.0f;
        cases.push_back(v);
        for (std::size_t at : {std::size_t{0}, n / 3, n - 1}) {
            std::vector<float> w = v;
            w[at] = 50.0f;  // one maximum, anywhere (a lane's first, middle or the tail)
            cases.push_back(w);
            w[n - 1 - at / 2] = 50.0f;  // and a tie after it
            cases.push_back(w);
            w[at] = nan;  // a NaN where the maximum was
            cases.push_back(w);
        }
        std::vector<float> all_nan(n, nan);
        cases.push_back(all_nan);
        all_nan[n / 2] = -inf;
        cases.push_back(all_nan);
    }
    for (const auto& v : cases) {
        INFO("size ", v.size());
        CHECK(argmax(v) == scan(v));
    }
}

TEST_CASE("the same seed gives the same tokens; another seed other tokens") {
    std::vector<float> logits{1.0f, 1.2f, 0.8f, 1.1f, 0.9f, 1.05f};
    Params p{.temperature = 1.0, .seed = 42};
    auto a = draw(p, logits, 64), b = draw(p, logits, 64);
    CHECK(a == b);
    p.seed = 43;
    CHECK(draw(p, logits, 64) != a);
}

TEST_CASE("temperature sampling follows the softmax") {
    std::vector<float> logits{0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};  // 1:2:3:4
    auto tokens = draw({.temperature = 1.0, .seed = 7}, logits, 20000);
    std::map<int, int> count;
    for (auto t : tokens) ++count[t];
    for (int i = 0; i < 4; ++i) CHECK(std::abs(count[i] / 20000.0 - (i + 1) / 10.0) < 0.015);
}

TEST_CASE("top-k 1 and a tiny top-p are greedy; top-k keeps only the k best") {
    std::vector<float> logits{0.1f, 2.0f, 1.9f, -3.0f};
    for (auto t : draw({.temperature = 1.5, .top_k = 1, .seed = 1}, logits, 50)) CHECK(t == 1);
    for (auto t : draw({.temperature = 1.5, .top_p = 1e-6, .seed = 1}, logits, 50)) CHECK(t == 1);
    for (auto t : draw({.temperature = 5.0, .top_k = 2, .seed = 3}, logits, 200)) CHECK((t == 1 || t == 2));
}

TEST_CASE("top-p keeps the smallest set reaching the mass") {
    std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
    std::map<int, int> count;
    for (auto t : draw({.temperature = 1.0, .top_p = 0.8, .seed = 5}, logits, 5000)) ++count[t];
    CHECK(count[2] == 0);
    CHECK(count[3] == 0);
    CHECK(std::abs(count[0] / 5000.0 - 0.625) < 0.03);
}

TEST_CASE("repetition penalty divides positive logits and multiplies negative ones, once per id") {
    std::vector<float> logits{2.0f, 1.9f, -1.0f};
    Sampler plain(Params{});
    CHECK(plain.next(logits, std::vector<std::int32_t>{0}) == 0);
    Sampler pen(Params{.repetition_penalty = 1.2});
    CHECK(pen.next(logits, std::vector<std::int32_t>{0, 0, 0}) == 1);  // 2.0/1.2 < 1.9, not 2.0/1.2³
    Sampler strong(Params{.repetition_penalty = 10.0});
    CHECK(strong.next(std::vector<float>{-0.1f, -0.5f}, std::vector<std::int32_t>{0}) == 1);
}
