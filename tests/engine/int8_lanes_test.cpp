// The lane order of int8 weights (engine/model/int8_lanes.h): a permutation of each row's full
// groups of 16 blocks that every reader undoes (Matrix::at, copy_row_plain), the AVX-512 VNNI
// products over it bitwise those of column order on the scalar path, for every activation row
// count, weight-row split and scale layout; a lane-packed matrix given to kernels that cannot
// read it is an error; the loader packs a copied safetensors set's int8 matrices and leaves a
// mapped one's as the file has them.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/int_kernels.h"
#include "engine/model/int8_lanes.h"
#include "engine/model/safetensors.h"
#include "engine/quant/quantize.h"
#include "tests/support/safetensors_files.h"
#include "tests/support/scratch_dir.h"

using namespace inkling;
using model::DType;

namespace {

// Widths around the group of 16 blocks (512 columns): none, one with a short tail, exact
// groups, groups and a tail, a ragged last block.
const std::int64_t kWidths[] = {32, 500, 512, 544, 1056, 2048 + 96 + 7};

std::vector<std::int8_t> random_int8(std::int64_t n, std::mt19937& rng) {
    std::uniform_int_distribution<int> d(-127, 127);
    std::vector<std::int8_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<std::int8_t>(d(rng));
    return v;
}

// An int8 matrix [rows][cols] over `q` (rows padded to 32 columns), scales a row (group 0) or
// per `group` columns.
model::Matrix int8_matrix(const std::vector<std::int8_t>& q, const std::vector<float>& scales, std::int64_t rows,
                          std::int64_t cols, std::int64_t group) {
    model::Matrix m;
    m.data = reinterpret_cast<const std::byte*>(q.data());
    m.dtype = DType::I8;
    m.rows = rows;
    m.cols = cols;
    m.row_stride = quant::padded_cols(cols);
    m.group = group ? group : m.row_stride;
    m.scale_stride = (m.row_stride + m.group - 1) / m.group;
    m.scales = scales.data();
    return m;
}

}  // namespace

TEST_CASE("the lane order moves each full group's bytes to word k · 16 + block, leaves the tail, and undoes") {
    std::mt19937 rng(3);
    for (std::int64_t cols : kWidths) {
        CAPTURE(cols);
        const std::int64_t padded = quant::padded_cols(cols), rows = 3;
        const auto plain = random_int8(rows * padded, rng);
        auto packed = plain;
        model::pack_int8_lanes(reinterpret_cast<std::byte*>(packed.data()), rows, cols, padded);
        const std::int64_t grouped = model::lane_grouped_cols(cols);
        CHECK(grouped == padded / 512 * 512);
        bool placed = true;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < padded; ++c) {
                // Column c = byte e of block j of its group: word e / 4 of block j.
                const std::int64_t g = c / 512 * 512, j = (c - g) / 32, e = (c - g) % 32;
                const std::int64_t want = c < grouped ? g + (e / 4) * 64 + j * 4 + e % 4 : c;
                placed = placed && model::lane_offset(c, cols) == want &&
                         packed[static_cast<std::size_t>(r * padded + want)] == plain[static_cast<std::size_t>(r * padded + c)];
            }
        CHECK(placed);
        // Activations take the same order; a packed matrix reads back as the plain one.
        std::vector<std::int8_t> x(plain.size());
        model::to_int8_lanes(plain.data(), x.data(), rows, cols, padded);
        CHECK(x == packed);
        std::vector<float> scales(static_cast<std::size_t>(rows), 0.5f);
        model::Matrix a = int8_matrix(plain, scales, rows, cols, 0), b = int8_matrix(packed, scales, rows, cols, 0);
        b.lane_packed = true;
        std::vector<std::byte> back(static_cast<std::size_t>(padded));
        for (std::int64_t r = 0; r < rows; ++r) {
            model::copy_row_plain(b, r, back.data(), back.size());
            CHECK(std::memcmp(back.data(), a.row(r), back.size()) == 0);
            std::vector<float> ra(static_cast<std::size_t>(cols)), rb(static_cast<std::size_t>(cols));
            model::row_to_f32(a, r, ra.data());
            model::row_to_f32(b, r, rb.data());
            CHECK(ra == rb);
        }
    }
}

TEST_CASE("lane-packed int8 products are bitwise the column order's on the scalar path: rows, splits, scales") {
    if (!cpu::int8_lanes_pay(cpu::Isa::Avx512)) {
        MESSAGE("no AVX-512 VNNI here: no kernel reads the lane order (the layout case above still runs)");
        CHECK_FALSE(cpu::int8_lanes_pay(cpu::Isa::Avx2));
        return;
    }
    CHECK_FALSE(cpu::int8_lanes_pay(cpu::Isa::Avx2));
    CHECK_FALSE(cpu::int8_lanes_pay(cpu::Isa::Scalar));
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0, 1);
    const std::int64_t rows = 45;  // 16-row lanes twice, then 13 rows through the multi-row kernels
    for (std::int64_t cols : kWidths)
        for (std::int64_t group : {std::int64_t{0}, std::int64_t{32}, std::int64_t{64}}) {
            CAPTURE(cols);
            CAPTURE(group);
            const std::int64_t padded = quant::padded_cols(cols);
            auto q = random_int8(rows * padded, rng);
            for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t c = cols; c < padded; ++c) q[static_cast<std::size_t>(r * padded + c)] = 0;
            std::vector<float> scales(static_cast<std::size_t>(rows * padded / 32));
            for (auto& s : scales) s = 1e-3f * static_cast<float>(1 + rng() % 97);
            auto packed = q;
            model::pack_int8_lanes(reinterpret_cast<std::byte*>(packed.data()), rows, cols, padded);
            const model::Matrix plain = int8_matrix(q, scales, rows, cols, group);
            model::Matrix lanes = int8_matrix(packed, scales, rows, cols, group);
            lanes.lane_packed = true;
            for (std::int64_t n : {1, 2, 3, 4, 5, 9, 23, 24, 31, 40}) {
                CAPTURE(n);
                std::vector<float> x(static_cast<std::size_t>(n * cols));
                for (auto& v : x) v = normal(rng);
                cpu::IntActivations xs, xv;
                cpu::prepare_int_activations(cpu::Isa::Scalar, true, x.data(), n, cols, xs);
                cpu::prepare_int_activations(cpu::Isa::Avx512, true, x.data(), n, cols, xv);
                REQUIRE(xv.lanes.size() == xv.a.q.size());
                std::vector<float> want(static_cast<std::size_t>(n * rows)), got(want.size());
                cpu::int_product_rows(cpu::Isa::Scalar, plain, xs, 0, rows, want.data());
                // The rows split as threads split them: at 0, 7, 16 and 20.
                for (std::int64_t split : {0, 7, 16, 20}) {
                    CAPTURE(split);
                    std::fill(got.begin(), got.end(), -1.0f);
                    cpu::int_product_rows(cpu::Isa::Avx512, lanes, xv, 0, split, got.data());
                    cpu::int_product_rows(cpu::Isa::Avx512, lanes, xv, split, rows, got.data());
                    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
                }
            }
        }
}

TEST_CASE("a lane-packed matrix given to kernels that do not read the lane order is an error, not a misread") {
    std::mt19937 rng(5);
    const std::int64_t rows = 4, cols = 544, padded = quant::padded_cols(cols);
    const auto q = random_int8(rows * padded, rng);
    std::vector<float> scales(static_cast<std::size_t>(rows), 0.01f);
    model::Matrix m = int8_matrix(q, scales, rows, cols, 0);
    m.lane_packed = true;
    std::vector<float> x(static_cast<std::size_t>(cols), 0.25f), y(static_cast<std::size_t>(rows));
    for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2}) {
        if (!cpu::isa_supported(isa)) continue;
        cpu::IntActivations a;
        cpu::prepare_int_activations(isa, true, x.data(), 1, cols, a);
        std::string error;
        try {
            cpu::int_product_rows(isa, m, a, 0, rows, y.data());
        } catch (const std::logic_error& e) {
            error = e.what();
        }
        CHECK(error.find("lane-packed I8 weights") != std::string::npos);
    }
}

TEST_CASE("the loader packs a copied set's int8 matrices (those with .scales), and leaves a mapped set's") {
    std::mt19937 rng(9);
    test_support::ScratchDir t("int8-lanes");
    const std::int64_t cols = 544;
    const auto w = random_int8(3 * cols, rng), raw_bytes = random_int8(2 * cols, rng);
    const std::vector<float> scales{0.5f, 0.25f, 0.125f};
    test_support::Tensors ts;
    ts["w"] = {"I8", {3, cols}, test_support::raw(w)};
    ts["w.scales"] = {"F32", {3, 1}, test_support::raw(scales)};
    ts["raw"] = {"I8", {2, cols}, test_support::raw(raw_bytes)};  // no scales: not a weight matrix
    test_support::write_safetensors(t.dir / "model.safetensors", ts);

    auto copied = model::SafetensorsSet::open_dir(t.dir, model::WeightsMemory::Copy);
    REQUIRE(copied.copied());
    CHECK(copied.pack_int8_lanes() == 1);
    CHECK(copied.pack_int8_lanes() == 0);  // once
    const model::TensorInfo* pw = copied.find("w");
    CHECK(pw->lane_packed);
    auto want = w;
    model::pack_int8_lanes(reinterpret_cast<std::byte*>(want.data()), 3, cols, cols);
    CHECK(std::memcmp(pw->data, want.data(), want.size()) == 0);
    CHECK_FALSE(copied.find("raw")->lane_packed);
    CHECK(std::memcmp(copied.find("raw")->data, raw_bytes.data(), raw_bytes.size()) == 0);

    auto mapped = model::SafetensorsSet::open_dir(t.dir, model::WeightsMemory::Map);
    CHECK(mapped.pack_int8_lanes() == 0);
    CHECK_FALSE(mapped.find("w")->lane_packed);
    CHECK(std::memcmp(mapped.find("w")->data, w.data(), w.size()) == 0);
}
