// The quantizers of docs/container.md: int8 per row, int4 per group (32 and 64), int8
// activations per block of 32 — rounding, packing, padding and zero rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "engine/quant/quantize.h"

using namespace inkling;
using model::DType;

namespace {

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng, float range = 1.0f) {
    std::uniform_real_distribution<float> u(-range, range);
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    for (auto& v : w) v = u(rng);
    return w;
}

int nibble(std::byte b, bool high) {
    const int v = high ? static_cast<int>(b) >> 4 : static_cast<int>(b) & 0xf;
    return v >= 8 ? v - 16 : v;
}

}  // namespace

TEST_CASE("int8 rows: round trip within half a step, padding zero, zero rows have scale 0") {
    std::mt19937 rng(1);
    for (std::int64_t cols : {1, 24, 32, 48, 80, 100}) {
        CAPTURE(cols);
        const std::int64_t rows = 5;
        auto w = random_matrix(rows, cols, rng);
        for (std::int64_t c = 0; c < cols; ++c) w[static_cast<std::size_t>(2 * cols + c)] = 0.0f;  // row 2: zeros
        const auto q = quant::quantize_int8_rows(w.data(), rows, cols);
        REQUIRE(q.padded == quant::padded_cols(cols));
        REQUIRE(q.padded % 32 == 0);
        CHECK(q.groups == 1);
        CHECK(q.group == q.padded);
        const model::Matrix m = q.view();
        CHECK(m.scales[2] == 0.0f);
        for (std::int64_t r = 0; r < rows; ++r) {
            const float s = m.row_scales(r)[0];
            float amax = 0;
            for (std::int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
            CHECK(s == amax / 127.0f);
            for (std::int64_t c = 0; c < cols; ++c) {
                const float orig = w[static_cast<std::size_t>(r * cols + c)];
                const auto qv = static_cast<std::int8_t>(m.row(r)[c]);
                CHECK(qv >= -127);
                CHECK(std::fabs(orig - m.at(r, c)) <= s / 2 * (1 + 1e-6f));
                if (s > 0) CHECK(qv == std::clamp(std::lround(orig / s), -127l, 127l));
            }
            for (std::int64_t c = cols; c < q.padded; ++c) CHECK(m.row(r)[c] == std::byte{0});
        }
    }
}

TEST_CASE("int4 groups of 32 and 64: round trip, nibble order, short last group, padding") {
    std::mt19937 rng(2);
    for (std::int64_t group : {32, 64})
        for (std::int64_t cols : {24, 48, 64, 80, 130}) {
            CAPTURE(group);
            CAPTURE(cols);
            const std::int64_t rows = 4;
            auto w = random_matrix(rows, cols, rng, 3.0f);
            for (std::int64_t c = 0; c < cols; ++c) w[static_cast<std::size_t>(cols + c)] = 0.0f;  // row 1: zeros
            const auto q = quant::quantize_int4_groups(w.data(), rows, cols, group);
            CHECK(q.padded == quant::padded_cols(cols));
            CHECK(q.groups == (q.padded + group - 1) / group);
            CHECK(q.data.size() == static_cast<std::size_t>(rows * q.padded / 2));
            const model::Matrix m = q.view();
            for (std::int64_t g = 0; g < q.groups; ++g) CHECK(m.row_scales(1)[g] == 0.0f);
            for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t c = 0; c < q.padded; ++c) {
                    const int v = nibble(m.row(r)[c / 2], c % 2 == 1);
                    if (c >= cols) {
                        CHECK(v == 0);
                        continue;
                    }
                    const float s = m.row_scales(r)[c / group];
                    const float orig = w[static_cast<std::size_t>(r * cols + c)];
                    CHECK(v >= -7);
                    CHECK(v <= 7);
                    CHECK(std::fabs(orig - m.at(r, c)) <= s / 2 * (1 + 1e-6f));
                    if (s > 0) CHECK(v == std::clamp(std::lround(orig / s), -7l, 7l));
                }
        }
    // Element 2j in the low nibble of byte j, 2j+1 in the high one, two's complement.
    std::vector<float> w(32, 0.0f);
    w[0] = 7, w[1] = -7, w[2] = 3.5f, w[3] = -3.5f;  // ties go away from zero: ±4
    const auto q = quant::quantize_int4_groups(w.data(), 1, 32, 32);
    CHECK(q.scales[0] == 1.0f);
    CHECK(static_cast<unsigned>(q.data[0]) == 0x97u);  // low 7, high -7 (0x9)
    CHECK(static_cast<unsigned>(q.data[1]) == 0xc4u);  // low 4, high -4 (0xc)
}

TEST_CASE("the _into variants write what the owning ones return") {
    std::mt19937 rng(3);
    auto w = random_matrix(6, 80, rng);
    const auto a = quant::quantize_int4_groups(w.data(), 6, 80, 64);
    std::vector<std::byte> data(a.data.size(), std::byte{0x55});
    std::vector<float> scales(a.scales.size());
    quant::quantize_int4_groups_into(w.data(), 6, 80, 64, data.data(), scales.data());
    CHECK(data == a.data);
    CHECK(scales == a.scales);
    const auto b = quant::quantize_int8_rows(w.data(), 6, 80);
    std::vector<std::byte> data8(b.data.size(), std::byte{0x55});
    std::vector<float> scales8(6);
    quant::quantize_int8_rows_into(w.data(), 6, 80, data8.data(), scales8.data());
    CHECK(data8 == b.data);
    CHECK(scales8 == b.scales);
    CHECK_THROWS_AS(quant::quantize_int4_groups(w.data(), 6, 80, 48), std::invalid_argument);
}

TEST_CASE("activations: blocks of 32, scale max|x|/127, q = round(x / s), sums, zero blocks") {
    std::mt19937 rng(4);
    const std::int64_t rows = 3, cols = 80;
    auto x = random_matrix(rows, cols, rng, 5.0f);
    for (std::int64_t c = 32; c < 64; ++c) x[static_cast<std::size_t>(cols + c)] = 0.0f;  // row 1, block 1
    quant::QuantizedActivations a;
    quant::quantize_activations(x.data(), rows, cols, a);
    REQUIRE(a.padded == 96);
    REQUIRE(a.blocks == 3);
    CHECK(a.scales[1 * 3 + 1] == 0.0f);
    CHECK(a.sums[1 * 3 + 1] == 0);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t b = 0; b < a.blocks; ++b) {
            const float s = a.scales[static_cast<std::size_t>(r * a.blocks + b)];
            float amax = 0;
            for (std::int64_t c = b * 32; c < std::min(cols, b * 32 + 32); ++c)
                amax = std::max(amax, std::fabs(x[r * cols + c]));
            CHECK(s == amax / 127.0f);
            std::int32_t sum = 0;
            for (std::int64_t c = b * 32; c < b * 32 + 32; ++c) {
                const std::int8_t q = a.q[static_cast<std::size_t>(r * a.padded + c)];
                sum += q;
                if (c >= cols) CHECK(q == 0);
                else if (s > 0) {
                    CHECK(q == std::clamp(std::lround(x[r * cols + c] / s), -127l, 127l));
                    CHECK(std::fabs(q * s - x[r * cols + c]) <= s / 2 * (1 + 1e-6f));
                }
            }
            CHECK(sum == a.sums[static_cast<std::size_t>(r * a.blocks + b)]);
        }
}

TEST_CASE("relative_l2") {
    std::vector<float> a{3, 4}, b{3, 4}, c{3, 5}, z{0, 0};
    CHECK(quant::relative_l2(a.data(), b.data(), 2) == 0.0);
    CHECK(quant::relative_l2(a.data(), c.data(), 2) == doctest::Approx(0.2));
    CHECK(quant::relative_l2(z.data(), z.data(), 2) == 0.0);
}
