// The lane order of int8 and int4 weights (engine/model/lane_order.h): a permutation of each
// row's full groups of 16 blocks that every reader undoes (Matrix::at, copy_row_plain), the
// AVX-512 VNNI products over it bitwise those of column order on the scalar path, for every
// activation row count, weight-row split and scale layout; a lane-packed matrix given to
// kernels that cannot read it is an error; the loader packs a copied safetensors set's integer
// matrices and leaves a mapped one's as the file has them.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/int_kernels.h"
#include "engine/model/lane_order.h"
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

std::vector<float> random_floats(std::int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> g(0, 1);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = g(rng);
    return v;
}

// A quantized [rows][cols] matrix: int8 with a scale a row (group 0) or per `group` columns
// (the converter writes the first; the kernels take any), or int4 in groups of `group`.
quant::QuantizedMatrix quantized(DType t, std::int64_t rows, std::int64_t cols, std::int64_t group, std::mt19937& rng) {
    const auto w = random_floats(rows * cols, rng);
    if (t == DType::Q4) return quant::quantize_int4_groups(w.data(), rows, cols, group);
    quant::QuantizedMatrix q = quant::quantize_int8_rows(w.data(), rows, cols);
    if (group) {
        q.group = group;
        q.groups = (q.padded + group - 1) / group;
        q.scales.resize(static_cast<std::size_t>(rows * q.groups));
        for (auto& s : q.scales) s = 1e-3f * static_cast<float>(1 + rng() % 97);
    }
    return q;
}

// The same matrix in the lane order (its bytes in `bytes`).
model::Matrix lane_packed(const quant::QuantizedMatrix& q, std::vector<std::byte>& bytes) {
    bytes = q.data;
    model::Matrix m = q.view();
    const auto row_bytes = static_cast<std::int64_t>(model::dtype_bytes(q.dtype, q.padded));
    model::pack_lanes(q.dtype, bytes.data(), q.rows, q.cols, row_bytes);
    m.data = bytes.data();
    m.lane_packed = true;
    return m;
}

}  // namespace

TEST_CASE("the lane order moves each full group's word k of block j to 16·k + j, leaves the tail, and undoes") {
    std::mt19937 rng(3);
    for (DType t : {DType::I8, DType::Q4})
        for (std::int64_t cols : kWidths) {
            CAPTURE(model::dtype_name(t));
            CAPTURE(cols);
            const auto q = quantized(t, 3, cols, t == DType::Q4 ? 32 : 0, rng);
            std::vector<std::byte> bytes;
            const model::Matrix a = q.view(), b = lane_packed(q, bytes);
            const std::int64_t bb = t == DType::Q4 ? 16 : 32, row_bytes = static_cast<std::int64_t>(model::dtype_bytes(t, q.padded));
            const std::int64_t grouped = model::lane_grouped_bytes(t, cols);
            CHECK(grouped == q.padded / 512 * 16 * bb);
            bool placed = true;
            for (std::int64_t r = 0; r < q.rows; ++r)
                for (std::int64_t p = 0; p < row_bytes; ++p) {
                    // Byte p = byte e of block j of its group: word e / 4 of block j.
                    const std::int64_t g = p / (16 * bb) * (16 * bb), j = (p - g) / bb, e = (p - g) % bb;
                    const std::int64_t want = p < grouped ? g + (e / 4) * 64 + j * 4 + e % 4 : p;
                    placed = placed && model::lane_offset(t, p, cols) == want && b.row(r)[want] == a.row(r)[p];
                }
            CHECK(placed);
            std::vector<std::byte> back(static_cast<std::size_t>(row_bytes));
            for (std::int64_t r = 0; r < q.rows; ++r) {
                model::copy_row_plain(b, r, back.data(), back.size());
                CHECK(std::memcmp(back.data(), a.row(r), back.size()) == 0);
                std::vector<float> ra(static_cast<std::size_t>(cols)), rb(static_cast<std::size_t>(cols));
                model::row_to_f32(a, r, ra.data());
                model::row_to_f32(b, r, rb.data());
                CHECK(ra == rb);
            }
            // Activations take the same order (int8 values, as the weights' int8 bytes).
            if (t == DType::I8) {
                std::vector<std::int8_t> x(bytes.size());
                model::to_int8_lanes(reinterpret_cast<const std::int8_t*>(q.data.data()), x.data(), q.rows, cols, q.padded);
                CHECK(std::memcmp(x.data(), bytes.data(), x.size()) == 0);
            }
        }
}

TEST_CASE("lane-packed int8 and int4 products are bitwise column order's on the scalar path: rows, splits, scales") {
    if (!cpu::lane_order_pays(cpu::Isa::Avx512)) {
        MESSAGE("no AVX-512 VNNI here: no kernel reads the lane order (the layout case above still runs)");
        CHECK_FALSE(cpu::lane_order_pays(cpu::Isa::Avx2));
        return;
    }
    CHECK_FALSE(cpu::lane_order_pays(cpu::Isa::Avx2));
    CHECK_FALSE(cpu::lane_order_pays(cpu::Isa::Scalar));
    std::mt19937 rng(11);
    const std::int64_t rows = 45;  // 16-row lanes twice, then 13 rows through the multi-row kernels
    const std::pair<DType, std::int64_t> kinds[] = {{DType::I8, 0}, {DType::I8, 32}, {DType::I8, 64}, {DType::Q4, 32},
                                                    {DType::Q4, 64}};
    for (const auto& [t, group] : kinds)
        for (std::int64_t cols : kWidths) {
            CAPTURE(model::dtype_name(t));
            CAPTURE(group);
            CAPTURE(cols);
            const auto q = quantized(t, rows, cols, group, rng);
            std::vector<std::byte> bytes;
            const model::Matrix plain = q.view(), lanes = lane_packed(q, bytes);
            for (std::int64_t n : {1, 2, 3, 4, 5, 9, 23, 24, 31, 40}) {
                CAPTURE(n);
                const auto x = random_floats(n * cols, rng);
                cpu::IntActivations xs, xv;
                cpu::prepare_int_activations(cpu::Isa::Scalar, true, x.data(), n, cols, xs);
                cpu::prepare_int_activations(cpu::Isa::Avx512, true, x.data(), n, cols, xv);
                REQUIRE(xv.lanes.size() == xv.a.q.size());
                REQUIRE(xv.q4_lanes.size() == xv.a.q.size());
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
    const std::int64_t cols = 544;
    for (DType t : {DType::I8, DType::Q4}) {
        const auto q = quantized(t, 4, cols, t == DType::Q4 ? 32 : 0, rng);
        std::vector<std::byte> bytes;
        const model::Matrix m = lane_packed(q, bytes);
        std::vector<float> x(static_cast<std::size_t>(cols), 0.25f), y(4);
        for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2}) {
            if (!cpu::isa_supported(isa)) continue;
            cpu::IntActivations a;
            cpu::prepare_int_activations(isa, true, x.data(), 1, cols, a);
            std::string error;
            try {
                cpu::int_product_rows(isa, m, a, 0, 4, y.data());
            } catch (const std::logic_error& e) {
                error = e.what();
            }
            CHECK(error.find(std::string("lane-packed ") + model::dtype_name(m.dtype) + " weights") != std::string::npos);
        }
    }
}

TEST_CASE("the loader packs a copied set's int8 and int4 matrices (those with .scales), and leaves a mapped set's") {
    std::mt19937 rng(9);
    test_support::ScratchDir t("lane-order");
    const std::int64_t cols = 544;
    const auto w = random_int8(3 * cols, rng), raw_bytes = random_int8(2 * cols, rng);
    const std::vector<float> scales{0.5f, 0.25f, 0.125f};
    test_support::Tensors ts;
    ts["w"] = {"I8", {3, cols}, test_support::raw(w)};
    ts["w.scales"] = {"F32", {3, 1}, test_support::raw(scales)};
    ts["raw"] = {"I8", {2, cols}, test_support::raw(raw_bytes)};  // no scales: not a weight matrix
    const auto q4 = random_int8(2 * cols / 2, rng);                // int4, two a byte
    ts["q"] = {"U8", {2, cols / 2}, test_support::raw(q4)};
    ts["q.scales"] = {"F32", {2, cols / 32}, test_support::raw(std::vector<float>(2 * cols / 32, 0.5f))};
    test_support::write_safetensors(t.dir / "model.safetensors", ts);

    auto copied = model::SafetensorsSet::open_dir(t.dir, model::WeightsMemory::Copy);
    REQUIRE(copied.copied());
    CHECK(copied.pack_lane_order() == 2);
    CHECK(copied.pack_lane_order() == 0);  // once
    const model::TensorInfo* pw = copied.find("w");
    CHECK(pw->lane_packed);
    auto want = w;
    model::pack_lanes(DType::I8, reinterpret_cast<std::byte*>(want.data()), 3, cols, cols);
    CHECK(std::memcmp(pw->data, want.data(), want.size()) == 0);
    auto want4 = q4;
    model::pack_lanes(DType::Q4, reinterpret_cast<std::byte*>(want4.data()), 2, cols, cols / 2);
    CHECK(copied.find("q")->lane_packed);
    CHECK(std::memcmp(copied.find("q")->data, want4.data(), want4.size()) == 0);
    CHECK_FALSE(copied.find("raw")->lane_packed);
    CHECK(std::memcmp(copied.find("raw")->data, raw_bytes.data(), raw_bytes.size()) == 0);

    auto mapped = model::SafetensorsSet::open_dir(t.dir, model::WeightsMemory::Map);
    CHECK(mapped.pack_lane_order() == 0);
    CHECK_FALSE(mapped.find("w")->lane_packed);
    CHECK_FALSE(mapped.find("q")->lane_packed);
    CHECK(std::memcmp(mapped.find("w")->data, w.data(), w.size()) == 0);
}
