// matmul on int8 and int4 weights: against a double-precision reference built from the
// dequantized weights and activations (tight), against the f32 product (loose), and
// bitwise equal across ISAs, activation row counts, thread counts and grouped calls.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/bf16_matmul.h"
#include "engine/cpu/int_kernels.h"
#include "engine/cpu/kernels.h"
#include "engine/quant/quantize.h"

using namespace inkling;
using model::DType;

namespace {

struct Case {
    DType dtype;
    std::int64_t group;  // int4 only
    const char* name;
};
const Case kCases[] = {{DType::I8, 0, "int8"}, {DType::Q4, 32, "int4g32"}, {DType::Q4, 64, "int4g64"}};

quant::QuantizedMatrix quantize(const Case& c, const std::vector<float>& w, std::int64_t rows, std::int64_t cols) {
    return c.dtype == DType::I8 ? quant::quantize_int8_rows(w.data(), rows, cols)
                                : quant::quantize_int4_groups(w.data(), rows, cols, c.group);
}

std::vector<float> random_values(std::int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> g(0, 1);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = g(rng);
    return v;
}

std::vector<float> run(const float* x, std::int64_t rows_x, const model::Matrix& w, cpu::ThreadPool& pool) {
    std::vector<float> y(static_cast<std::size_t>(rows_x * w.rows), NAN);
    cpu::matmul(x, rows_x, w, y.data(), pool);
    return y;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<cpu::Isa> available_isas() {
    std::vector<cpu::Isa> out;
    for (cpu::Isa isa : cpu::isas()) {
        if (cpu::isa_supported(isa)) out.push_back(isa);
        else MESSAGE("skipping ISA " << std::string(cpu::isa_name(isa)) << ": this CPU lacks it");
    }
    if (cpu::best_isa() == cpu::Isa::Avx512 && !cpu::has_avx512_vnni())
        MESSAGE("no AVX-512 VNNI: the avx512 integer kernels are the AVX2 ones here");
    return out;
}

// Runs `fn` with each ISA this CPU has selected, then restores the best one.
template <class Fn>
void each_isa(Fn fn) {
    struct Restore {
        ~Restore() { cpu::set_isa(cpu::best_isa()); }
    } restore;
    for (cpu::Isa isa : available_isas()) {
        cpu::set_isa(isa);
        fn(isa);
    }
}

const std::int64_t kCols[] = {24, 48, 80, 96, 512, 544, 1024, 1056};

}  // namespace

TEST_CASE("integer matmul matches the dequantized double reference tightly and the f32 product loosely") {
    std::mt19937 rng(11);
    cpu::ThreadPool pool(2);
    each_isa([&](cpu::Isa isa) {
        for (const Case& c : kCases)
            for (std::int64_t cols : kCols) {
                const std::int64_t rows = 37, xs = 3;
                std::string isa_text = cpu::isa_name(isa);
                CAPTURE(isa_text);
                CAPTURE(c.name);
                CAPTURE(cols);
                auto wf = random_values(rows * cols, rng);
                for (std::int64_t i = 0; i < cols; ++i) wf[static_cast<std::size_t>(5 * cols + i)] = 0;  // a zero row
                auto x = random_values(xs * cols, rng);
                for (std::int64_t i = 0; i < std::min<std::int64_t>(cols, 32); ++i) x[static_cast<std::size_t>(i)] = 0;
                const auto q = quantize(c, wf, rows, cols);
                const model::Matrix w = q.view();
                const auto y = run(x.data(), xs, w, pool);
                quant::QuantizedActivations a;
                quant::quantize_activations(x.data(), xs, cols, a);
                double err_f32 = 0, norm_f32 = 0;
                for (std::int64_t s = 0; s < xs; ++s)
                    for (std::int64_t o = 0; o < rows; ++o) {
                        double want = 0, magnitude = 0, exact = 0;
                        for (std::int64_t i = 0; i < cols; ++i) {
                            const double xd = double(a.q[s * a.padded + i]) * a.scales[s * a.blocks + i / 32];
                            want += double(w.at(o, i)) * xd;
                            magnitude += std::fabs(double(w.at(o, i)) * xd);
                            exact += double(wf[o * cols + i]) * x[s * cols + i];
                        }
                        const double got = y[static_cast<std::size_t>(s * rows + o)];
                        // f32 rounding of one product per block and of the 16-way sum.
                        CHECK(std::fabs(got - want) <= 1e-6 * double(a.blocks + 8) * magnitude + 1e-30);
                        if (o == 5) CHECK(got == 0.0);
                        err_f32 += (got - exact) * (got - exact);
                        norm_f32 += exact * exact;
                    }
                // Quantization error of weights and activations together, as ‖Δy‖/‖y‖ over
                // the product: int8 stays below 2 %, int4 below 15 %.
                const double rel = std::sqrt(err_f32 / norm_f32);
                CHECK(rel < (c.dtype == DType::I8 ? 0.02 : 0.15));
            }
    });
}

TEST_CASE("integer matmul is bitwise equal across scalar and every SIMD ISA (AVX2, AVX-512; NEON, SDOT, SMMLA)") {
    std::mt19937 rng(12);
    cpu::ThreadPool pool(2);
    for (const Case& c : kCases)
        for (std::int64_t cols : kCols)
            for (std::int64_t xs : {1, 2, 5, 13, 25}) {  // 25: AVX-512's 16-rows-a-lane kernel (from 24 rows)
                CAPTURE(c.name);
                CAPTURE(cols);
                CAPTURE(xs);
                const std::int64_t rows = 35;
                const auto q = quantize(c, random_values(rows * cols, rng), rows, cols);
                const auto x = random_values(xs * cols, rng);
                cpu::set_isa(cpu::Isa::Scalar);
                const auto reference = run(x.data(), xs, q.view(), pool);
                each_isa([&](cpu::Isa isa) {
                    std::string isa_text = cpu::isa_name(isa);
                    CAPTURE(isa_text);
                    CHECK(bitwise_equal(run(x.data(), xs, q.view(), pool), reference));
                });
            }
}

TEST_CASE("integer matmul: each row bitwise the same for 1..9 activation rows and any thread count") {
    std::mt19937 rng(13);
    each_isa([&](cpu::Isa isa) {
        for (const Case& c : kCases) {
            std::string isa_text = cpu::isa_name(isa);
            CAPTURE(isa_text);
            CAPTURE(c.name);
            const std::int64_t rows = 301, cols = 544;
            const auto q = quantize(c, random_values(rows * cols, rng), rows, cols);
            const auto x = random_values(9 * cols, rng);
            cpu::ThreadPool one(1);
            std::vector<std::vector<float>> solo;
            for (std::int64_t s = 0; s < 9; ++s) solo.push_back(run(x.data() + s * cols, 1, q.view(), one));
            for (unsigned threads : {1u, 2u, 3u}) {
                cpu::ThreadPool pool(threads);
                for (std::int64_t n = 1; n <= 9; ++n) {
                    CAPTURE(threads);
                    CAPTURE(n);
                    const auto y = run(x.data(), n, q.view(), pool);
                    for (std::int64_t s = 0; s < n; ++s)
                        CHECK(std::memcmp(y.data() + s * rows, solo[static_cast<std::size_t>(s)].data(),
                                          rows * sizeof(float)) == 0);
                }
            }
        }
    });
}

TEST_CASE("matmul_group mixes float, int8 and int4 jobs on shared activations, each as matmul alone") {
    std::mt19937 rng(14);
    cpu::ThreadPool pool(2);
    each_isa([&](cpu::Isa) {
        const std::int64_t cols = 80, xs = 4;
        const auto wf = random_values(64 * cols, rng);
        const auto q8 = quant::quantize_int8_rows(wf.data(), 64, cols);
        const auto q4 = quant::quantize_int4_groups(wf.data(), 40, cols, 32);
        const model::Matrix m8 = q8.view(), m4 = q4.view();
        const model::Matrix mf{reinterpret_cast<const std::byte*>(wf.data()), DType::F32, 64, cols, cols};
        const auto x = random_values(xs * cols, rng), x2 = random_values(2 * cols, rng);
        std::vector<float> y8(xs * 64), y4(xs * 40), yf(xs * 64), y4b(2 * 40);
        const cpu::MatJob jobs[] = {{x.data(), xs, &m8, y8.data()},
                                    {x.data(), xs, &mf, yf.data()},
                                    {x.data(), xs, &m4, y4.data()},
                                    {x2.data(), 2, &m4, y4b.data()}};
        cpu::matmul_group(jobs, pool);
        CHECK(bitwise_equal(y8, run(x.data(), xs, m8, pool)));
        CHECK(bitwise_equal(yf, run(x.data(), xs, mf, pool)));
        CHECK(bitwise_equal(y4, run(x.data(), xs, m4, pool)));
        CHECK(bitwise_equal(y4b, run(x2.data(), 2, m4, pool)));
    });
}

// A prompt chunk's MoE group: int4 routed experts over a few rows each beside a bf16 shared
// one over every row. The threads share it by cost (its arithmetic, not its bytes, past a
// few rows), so the split falls elsewhere than by bytes; each product keeps its bits.
TEST_CASE("matmul_group of few-row int4 experts and a many-row bf16 one, each as matmul alone on any thread count") {
    std::mt19937 rng(16);
    each_isa([&](cpu::Isa) {
        const std::int64_t cols = 256, out = 48, all_rows = 40;
        const auto x = random_values(all_rows * cols, rng);
        std::vector<quant::QuantizedMatrix> routed;
        for (int e = 0; e < 5; ++e) routed.push_back(quant::quantize_int4_groups(random_values(out * cols, rng).data(), out, cols, 32));
        const auto sf = random_values(out * cols, rng);
        std::vector<std::uint16_t> sh(sf.size());
        for (std::size_t i = 0; i < sf.size(); ++i) sh[i] = cpu::round_to_bf16(sf[i]);
        const model::Matrix shared{reinterpret_cast<const std::byte*>(sh.data()), DType::BF16, out, cols, cols};
        const std::int64_t rows_of[] = {3, 1, 7, 2, 5};
        std::vector<model::Matrix> views;
        for (const auto& q : routed) views.push_back(q.view());
        cpu::ThreadPool one(1);
        std::vector<std::vector<float>> want;
        for (int e = 0; e < 5; ++e) want.push_back(run(x.data() + e * cols, rows_of[e], views[e], one));
        want.push_back(run(x.data(), all_rows, shared, one));
        for (unsigned threads : {2u, 3u}) {
            CAPTURE(threads);
            cpu::ThreadPool pool(threads);
            std::vector<std::vector<float>> got;
            std::vector<cpu::MatJob> jobs;
            for (int e = 0; e < 5; ++e) got.emplace_back(static_cast<std::size_t>(rows_of[e] * out));
            got.emplace_back(static_cast<std::size_t>(all_rows * out));
            for (int e = 0; e < 5; ++e) jobs.push_back({x.data() + e * cols, rows_of[e], &views[e], got[e].data()});
            jobs.push_back({x.data(), all_rows, &shared, got[5].data()});
            cpu::matmul_group(jobs, pool);
            for (std::size_t j = 0; j < got.size(); ++j) CHECK(bitwise_equal(got[j], want[j]));
        }
    });
}

TEST_CASE("row_f32 of int8 and int4 rows (embedding lookups) dequantizes exactly") {
    std::mt19937 rng(15);
    const auto wf = random_values(3 * 48, rng);
    each_isa([&](cpu::Isa) {
        for (const Case& c : kCases) {
            const auto q = quantize(c, wf, 3, 48);
            const model::Matrix m = q.view();
            std::vector<float> row(48);
            cpu::row_f32(m, 2, row.data());
            for (std::int64_t i = 0; i < 48; ++i) CHECK(row[i] == m.at(2, i));
        }
    });
}

TEST_CASE("vectorized activation quantization gives quantize_activations' values and q4 order bit for bit") {
    // The vectorized quantizers this CPU runs: AVX2's, and AVX-512 VNNI's where it has it.
    std::vector<cpu::Isa> vectorized;
    for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512})
        if (cpu::isa_supported(isa) && cpu::int_kernel_name(isa) != std::string("scalar")) vectorized.push_back(isa);
    if (vectorized.empty()) {
        MESSAGE("no AVX2: the activations are quantized by the scalar code here");
        return;
    }
    std::mt19937 rng(16);
    for (std::int64_t cols : {1, 7, 31, 32, 33, 80, 544, 1057}) {
        CAPTURE(cols);
        const std::int64_t rows = 5;
        auto x = random_values(rows * cols, rng);
        // Ties (x / s = k + 0.5 exactly), a zero block, an all-negative block, NaN and ±inf.
        for (std::int64_t i = 0; i < cols; ++i) {
            if (i % 9 == 0) x[static_cast<std::size_t>(i)] = 2.5f;
            if (i % 9 == 1) x[static_cast<std::size_t>(i)] = -0.5f;
        }
        x[static_cast<std::size_t>(cols)] = 127.0f;  // row 1: s = 1 for its first block, so 2.5 ties
        for (std::int64_t i = 1; i < std::min<std::int64_t>(cols, 32); ++i)
            x[static_cast<std::size_t>(cols + i)] = static_cast<float>(i % 5) - 2.5f;
        for (std::int64_t i = 0; i < std::min<std::int64_t>(cols, 32); ++i) x[static_cast<std::size_t>(2 * cols + i)] = 0;
        for (std::int64_t i = 0; i < cols; ++i) x[static_cast<std::size_t>(3 * cols + i)] = -std::fabs(x[static_cast<std::size_t>(3 * cols + i)]);
        x[static_cast<std::size_t>(4 * cols)] = NAN;
        if (cols > 2) x[static_cast<std::size_t>(4 * cols + 2)] = INFINITY;
        // The reference: the scalar quantizer, and the q4 order (each block's even values,
        // then its odd ones) taken from it here.
        quant::QuantizedActivations ref;
        quant::quantize_activations(x.data(), rows, cols, ref);
        std::vector<std::int8_t> ref_q4(ref.q.size());
        for (std::size_t b = 0; b < ref.q.size(); b += 32)
            for (std::size_t i = 0; i < 16; ++i) {
                ref_q4[b + i] = ref.q[b + 2 * i];
                ref_q4[b + 16 + i] = ref.q[b + 2 * i + 1];
            }
        for (cpu::Isa isa : vectorized) {
            std::string isa_text = cpu::int_kernel_name(isa);
            CAPTURE(isa_text);
            cpu::IntActivations vec;
            cpu::prepare_int_activations(isa, true, x.data(), rows, cols, vec);
            CHECK(vec.a.rows == ref.rows);
            CHECK(vec.a.padded == ref.padded);
            CHECK(vec.a.q == ref.q);
            CHECK(vec.a.sums == ref.sums);
            CHECK(std::vector<std::int8_t>(vec.q4.begin(), vec.q4.end()) == ref_q4);
            REQUIRE(vec.a.scales.size() == ref.scales.size());
            CHECK(std::memcmp(vec.a.scales.data(), ref.scales.data(), ref.scales.size() * sizeof(float)) == 0);
            // Without the q4 order: the same values, no q4 copy.
            cpu::IntActivations plain;
            cpu::prepare_int_activations(isa, false, x.data(), rows, cols, plain);
            CHECK(plain.a.q == ref.q);
            CHECK(plain.q4.empty());
        }
    }
}

TEST_CASE("integer matmul: 12 to 64 activation rows, each row bitwise as alone and for any thread count") {
    std::mt19937 rng(17);
    cpu::ThreadPool pool(2), one(1);
    each_isa([&](cpu::Isa isa) {
        for (const Case& c : kCases) {
            std::string isa_text = cpu::isa_name(isa);
            CAPTURE(isa_text);
            CAPTURE(c.name);
            const std::int64_t rows = 45, cols = 1056;
            const auto q = quantize(c, random_values(rows * cols, rng), rows, cols);
            const auto x = random_values(64 * cols, rng);
            // 16 weight rows a lane from 24 activation rows on (AVX-512), the last 13 weight rows
            // and a thread's share that is not a multiple of 16 through the other kernels; below
            // 24 rows, four rows a weight load.
            cpu::ThreadPool three(3);
            for (std::int64_t n : {12, 17, 23, 24, 31, 64})
                for (cpu::ThreadPool* p : {&pool, &three}) {
                    CAPTURE(n);
                    CAPTURE(p->size());
                    const auto y = run(x.data(), n, q.view(), *p);
                    for (std::int64_t s = 0; s < n; ++s)
                        CHECK(std::memcmp(y.data() + s * rows, run(x.data() + s * cols, 1, q.view(), one).data(),
                                          rows * sizeof(float)) == 0);
                }
        }
    });
}
