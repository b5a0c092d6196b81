// The CPU's numerics do not depend on the ISA: every float operation the forward takes has
// one order on scalar, AVX2 and AVX-512 (and ARM64's levels), so a model's logits are the
// same bits on every CPU. A converted model quantizes its activations to int8 before each
// routed expert's product, where a last-bit difference upstream can move a rounding step and
// change a logit by far more than a tolerance would hide: these cases make any such
// difference fail on whatever machine runs them, not only where the build machine's CPU
// happens to differ.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/forward/forward.h"
#include "engine/model/weights.h"
#include "engine/sampling/sampler.h"
#include "tests/engine/converted_fixtures.h"
#include "tests/engine/fixture_paths.h"

namespace fs = std::filesystem;
using namespace inkling;

namespace {

std::vector<cpu::Isa> host_isas() {
    std::vector<cpu::Isa> out;
    for (cpu::Isa isa : cpu::isas())
        if (cpu::isa_supported(isa)) out.push_back(isa);
    return out;
}

struct RestoreIsa {
    cpu::Isa was = cpu::active_isa();
    ~RestoreIsa() { cpu::set_isa(was); }
};

// dot()'s order restated (kernels.h): 64 sums by fused multiply-adds, then halves added.
float dot_by_definition(const float* a, const float* b, std::int64_t n) {
    std::vector<float> s(64, 0.0f);
    const std::int64_t padded = (n + 63) / 64 * 64;
    for (std::int64_t i = 0; i < padded; ++i)
        s[static_cast<std::size_t>(i % 64)] =
            i < n ? std::fma(a[i], b[i], s[static_cast<std::size_t>(i % 64)]) : std::fma(0.0f, 0.0f, s[i % 64]);
    for (std::size_t h = 32; h >= 1; h /= 2)
        for (std::size_t j = 0; j < h; ++j) s[j] = s[j] + s[j + h];
    return s[0];
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every step's last-row logits of a greedy run: a 17-token prompt in chunks of 5, 12 tokens.
std::vector<std::vector<float>> greedy_logits(const model::Model& m) {
    const auto& c = m.config;
    cpu::ThreadPool pool(2);
    forward::Forward fw(m, pool);
    std::vector<std::int32_t> prompt;
    for (int i = 0; i < 17; ++i) prompt.push_back(static_cast<std::int32_t>((i * 37 + 11) % c.unpadded_vocab));
    auto st = forward::make_session(c, 64);
    std::vector<std::vector<float>> out;
    for (std::size_t at = 0; at < prompt.size(); at += 5) {
        const std::size_t k = std::min<std::size_t>(5, prompt.size() - at);
        out.push_back(fw.step(st, std::span(prompt).subspan(at, k), nullptr, false));
    }
    for (int i = 0; i < 12; ++i) {
        const auto next = static_cast<std::int32_t>(sampling::argmax(out.back()));
        out.push_back(fw.step(st, std::span(&next, 1), nullptr, false));
    }
    return out;
}

}  // namespace

TEST_CASE("dot and f32 products: the one order, bit for bit on every ISA of this CPU") {
    RestoreIsa restore;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (std::int64_t n : {1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 128, 129, 191, 256, 1000, 4099}) {
        CAPTURE(n);
        std::vector<float> a(static_cast<std::size_t>(n)), b(a.size());
        for (auto& v : a) v = u(rng);
        for (auto& v : b) v = u(rng);
        const float want = dot_by_definition(a.data(), b.data(), n);
        for (cpu::Isa isa : host_isas()) {
            CAPTURE(std::string(cpu::isa_name(isa)));
            cpu::set_isa(isa);
            const float got = cpu::dot(a.data(), b.data(), n);
            CHECK(std::memcmp(&got, &want, sizeof(float)) == 0);
        }
    }
    // An f32 matrix (AVX-512 takes four activation rows a weight row at a time).
    const std::int64_t rows = 13, cols = 200, xs = 6;
    std::vector<float> w(static_cast<std::size_t>(rows * cols)), x(static_cast<std::size_t>(xs * cols));
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = u(rng);
    model::Matrix m;
    m.dtype = model::DType::F32;
    m.rows = rows, m.cols = cols, m.row_stride = cols;
    m.data = reinterpret_cast<const std::byte*>(w.data());
    std::vector<float> want(static_cast<std::size_t>(xs * rows));
    for (std::int64_t s = 0; s < xs; ++s)
        for (std::int64_t o = 0; o < rows; ++o)
            want[static_cast<std::size_t>(s * rows + o)] = dot_by_definition(w.data() + o * cols, x.data() + s * cols, cols);
    cpu::ThreadPool pool(2);
    for (cpu::Isa isa : host_isas()) {
        CAPTURE(std::string(cpu::isa_name(isa)));
        cpu::set_isa(isa);
        std::vector<float> y(want.size());
        cpu::matmul(x.data(), xs, m, y.data(), pool);
        CHECK(same_bits(y, want));
    }
}

TEST_CASE("a model's logits are the same bits on every ISA of this CPU (f32, bf16, int8 and int4 experts)") {
    RestoreIsa restore;
    const std::vector<cpu::Isa> isas = host_isas();
    if (isas.size() < 2) MESSAGE("this CPU has one ISA level: the cases compare it with itself");
    struct Case {
        std::string name;
        fs::path dir;
    };
    const std::vector<Case> cases = {
        {"mixed-hf-f32", test_paths::fixtures() / "mixed-hf-f32"},
        {"base-release-bf16", test_paths::fixtures() / "base-release-bf16"},
        {"mixed-hf-f32 int8", test_paths::converted("mixed-hf-f32", experts::Format::Int8)},
        {"mixed-hf-f32 int4", test_paths::converted("mixed-hf-f32", experts::Format::Int4)},
        {"base-release-bf16 int8", test_paths::converted("base-release-bf16", experts::Format::Int8)},
        {"base-release-bf16 int4", test_paths::converted("base-release-bf16", experts::Format::Int4)},
    };
    for (const Case& k : cases) {
        CAPTURE(k.name);
        const auto model = model::load_model(k.dir);
        std::vector<std::vector<float>> first;
        for (cpu::Isa isa : isas) {
            CAPTURE(std::string(cpu::isa_name(isa)));
            cpu::set_isa(isa);
            const auto got = greedy_logits(model);
            if (first.empty()) {
                first = got;
                continue;
            }
            REQUIRE(got.size() == first.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
                CAPTURE(i);
                CHECK(same_bits(got[i], first[i]));
            }
        }
    }
}
