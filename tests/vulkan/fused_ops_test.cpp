// The fused ops of the decode step against the unfused ones they replace, on the same
// device (each unfused op checked against the CPU by the backend-ops suites): the SwiGLU
// inside gemv / moe_gemv / qact (`up` buffers), the router's logits inside moe_route, the K
// conv with the k-norm (conv_norm) — all bit for bit (the same float expressions in the
// same order) — and a decode row's conv + residual add + norm (conv_add_norm, with the MoE
// join as its input or not): x and the conv state bit for bit, h within float rounding (its
// workgroup is wider than rmsnorm.comp's, so the sum of squares groups differently).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cpu/activations.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/tensor.h"
#include "engine/quant/quantize.h"
#include "tests/vulkan/ops_harness.h"

using namespace inkling;
using test_ops::u32;

namespace {

std::vector<float> read(const vulkan::Buffer& b, std::size_t n) {
    std::vector<float> v(n);
    b.read(v.data(), n * 4);
    return v;
}

// Bit for bit, counting the elements that differ.
std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], 4) != 0;
    return n;
}

// silu(g)·u on the device into a copy of g (ew.comp's SWIGLU): the two-step path's input.
vulkan::Buffer device_swiglu(const test_ops::Device& dev, const std::vector<float>& g, const vulkan::Buffer& U) {
    vulkan::Buffer out = test_ops::input(*dev.ctx, g);
    vulkan::Frame f(*dev.ctx);
    f.begin();
    dev.ops->ew(f, vulkan::EwOp::Swiglu, out, U, u32(static_cast<std::int64_t>(g.size())));
    f.run();
    return out;
}

}  // namespace

TEST_CASE("vulkan fused swiglu: gemv of silu(gate)·up equals ew's SWIGLU then gemv, and the CPU") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    struct Shape {
        const char* name;
        std::int64_t O, I, S, x_off;
        bool bf16;
    };
    // wide (16-byte loads, four in flight), a tail of fewer loads than lanes, the scalar path
    // (I not a multiple of 8), several rows at an offset.
    for (const Shape s : {Shape{"bf16 1024x512, a decode row", 1024, 512, 1, 0, true},
                          Shape{"f32 300x1000, 3 rows at offset 8", 300, 1000, 3, 8, false},
                          Shape{"bf16 64x4104, 2 rows", 64, 4104, 2, 0, true},
                          Shape{"f32 33x37 (the scalar path), 5 rows at offset 3", 33, 37, 5, 3, false}}) {
        CAPTURE(s.name);
        test_ops::Rand rnd(static_cast<std::uint32_t>(s.O * 31 + s.I));
        const std::size_t n = static_cast<std::size_t>(s.x_off + s.S * s.I);
        const std::vector<float> g = rnd.uniform(n, -4.0f, 4.0f), u = rnd.uniform(n, -2.0f, 2.0f);
        std::vector<float> wf = rnd.uniform(static_cast<std::size_t>(s.O * s.I), -0.5f, 0.5f);
        std::vector<std::uint16_t> wb(wf.size());
        for (std::size_t i = 0; i < wf.size(); ++i) {
            wb[i] = test_ops::bf16_top(wf[i]);
            if (s.bf16) wf[i] = model::bf16_to_f32(wb[i]);
        }
        const vulkan::Buffer W = s.bf16 ? test_ops::input(ctx, wb) : test_ops::input(ctx, wf);
        const vulkan::Buffer G = test_ops::input(ctx, g), U = test_ops::input(ctx, u);
        const vulkan::Buffer P = device_swiglu(*dev, g, U);
        vulkan::Buffer Y1(ctx, static_cast<std::size_t>(s.S * s.O) * 4, vulkan::Buffer::Kind::Device),
            Y2(ctx, static_cast<std::size_t>(s.S * s.O) * 4, vulkan::Buffer::Kind::Device);
        const vulkan::GemvPush p{u32(s.O), u32(s.I), u32(s.S), u32(s.I), 0, u32(s.x_off), u32(s.I), 0, u32(s.O)};
        vulkan::Frame f(ctx);
        f.begin();
        dev->ops->gemv(f, s.bf16, W, G, Y1, p, &U);
        dev->ops->gemv(f, s.bf16, W, P, Y2, p);
        f.run();
        const auto fused = read(Y1, static_cast<std::size_t>(s.S * s.O)), two_step = read(Y2, fused.size());
        CHECK(differing(fused, two_step) == 0);
        // The CPU: the same activations (cpu::silu, the device's steps), then cpu::matmul.
        std::vector<float> act(static_cast<std::size_t>(s.S * s.I)), want(fused.size());
        for (std::size_t i = 0; i < act.size(); ++i) {
            const float x = g[static_cast<std::size_t>(s.x_off) + i];
            act[i] = cpu::silu(x) * u[static_cast<std::size_t>(s.x_off) + i];
        }
        model::Matrix m;
        m.dtype = s.bf16 ? model::DType::BF16 : model::DType::F32;
        m.rows = s.O, m.cols = s.I, m.row_stride = s.I;
        m.data = s.bf16 ? reinterpret_cast<const std::byte*>(wb.data()) : reinterpret_cast<const std::byte*>(wf.data());
        cpu::ThreadPool pool(1);
        cpu::matmul(act.data(), s.S, m, want.data(), pool);
        double worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(double(fused[i]) - want[i]));
        CHECK(worst <= 1e-4 * std::sqrt(static_cast<double>(s.I)));
    }
}

TEST_CASE("vulkan fused swiglu: moe_gemv of the pairs' silu(gate)·up equals ew's SWIGLU then moe_gemv") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    // 3 experts in slots, 5 pairs (one routed to an expert without a slot: left alone).
    const std::uint32_t O = 96, I = 136, pairs = 5;  // experts 0..3
    for (const bool bf16 : {false, true}) {
        CAPTURE(bf16);
        test_ops::Rand rnd(bf16 ? 7u : 8u);
        const std::vector<float> g = rnd.uniform(std::size_t{pairs} * I, -4.0f, 4.0f),
                                 u = rnd.uniform(std::size_t{pairs} * I, -2.0f, 2.0f);
        const std::vector<float> wf = rnd.uniform(std::size_t{3} * O * I, -0.5f, 0.5f);
        std::vector<std::uint16_t> wb(wf.size());
        for (std::size_t i = 0; i < wf.size(); ++i) wb[i] = test_ops::bf16_top(wf[i]);
        const vulkan::Buffer W = bf16 ? test_ops::input(ctx, wb) : test_ops::input(ctx, wf);
        const vulkan::Buffer G = test_ops::input(ctx, g), U = test_ops::input(ctx, u);
        const vulkan::Buffer P = device_swiglu(*dev, g, U);
        const vulkan::Buffer Route = test_ops::input(ctx, std::vector<std::uint32_t>{2, 0, 3, 1, 2});
        const vulkan::Buffer Slots = test_ops::input(ctx, std::vector<std::uint32_t>{1, 0, 2, ~0u});
        std::vector<float> sentinel(std::size_t{pairs} * O, test_ops::sentinel());
        vulkan::Buffer Y1 = test_ops::input(ctx, sentinel), Y2 = test_ops::input(ctx, sentinel);
        const vulkan::MoeGemvPush p{O, I, pairs, 1, 0, 3};
        vulkan::Frame f(ctx);
        f.begin();
        dev->ops->moe_gemv(f, bf16, p, W, G, Y1, {&Route}, Slots, &U);
        dev->ops->moe_gemv(f, bf16, p, W, P, Y2, {&Route}, Slots);
        f.run();
        const auto fused = read(Y1, sentinel.size()), two_step = read(Y2, sentinel.size());
        CHECK(differing(fused, two_step) == 0);
        // Pair 2's expert (3) has no slot: its row keeps the sentinel in both.
        for (std::uint32_t o = 0; o < O; ++o) CHECK(test_ops::same_bits(fused[2 * O + o], test_ops::sentinel()));
        CHECK(!test_ops::same_bits(fused[0], test_ops::sentinel()));
    }
}

TEST_CASE("vulkan fused swiglu: qact of silu(gate)·up equals ew's SWIGLU then qact and the CPU's bits on every ISA") {
    auto* dev = test_ops::device();
    if (!dev) return;
    if (!dev->ops->int_experts()) {
        MESSAGE("no shaderFloat64: no integer expert shaders");
        return;
    }
    vulkan::Context& ctx = *dev->ctx;
    // 4 rows of 200 (7 blocks of 32, the last padded) at offset 16 with a stride of 210; one
    // block all zero.
    const std::uint32_t rows = 4, cols = 200, blocks = 7, off = 16, stride = 210;
    test_ops::Rand rnd(11);
    std::vector<float> g = rnd.uniform(off + rows * stride, -4.0f, 4.0f), u = rnd.uniform(g.size(), -2.0f, 2.0f);
    for (std::uint32_t i = 0; i < 32; ++i) g[off + stride + 64 + i] = 0.0f;  // silu(0)·u = 0
    const vulkan::Buffer G = test_ops::input(ctx, g), U = test_ops::input(ctx, u);
    const vulkan::Buffer P = device_swiglu(*dev, g, U);
    const std::size_t qwords = std::size_t{rows} * blocks * 8, scales = std::size_t{rows} * blocks;
    vulkan::Buffer Q1(ctx, qwords * 4, vulkan::Buffer::Kind::Device), Q2(ctx, qwords * 4, vulkan::Buffer::Kind::Device),
        S1(ctx, scales * 4, vulkan::Buffer::Kind::Device), S2(ctx, scales * 4, vulkan::Buffer::Kind::Device);
    const vulkan::QactPush p{rows, cols, blocks, off, stride};
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->qact(f, p, G, Q1, S1, &U);
    dev->ops->qact(f, p, P, Q2, S2);
    f.run();
    const auto q1 = read(Q1, qwords);
    CHECK(differing(q1, read(Q2, qwords)) == 0);
    const auto s1 = read(S1, scales);
    CHECK(differing(s1, read(S2, scales)) == 0);
    CHECK(s1[blocks + 2] == 0.0f);  // the zero block
    CHECK(s1[0] > 0.0f);
    // The activations entering the down projection's quantization are the CPU's bits under
    // every ISA this CPU has: cpu::swiglu (the host's expert path) then
    // quant::quantize_activations give the device's q and scales exactly.
    const cpu::Isa was = cpu::active_isa();
    for (cpu::Isa isa : cpu::isas()) {
        if (!cpu::isa_supported(isa)) continue;
        CAPTURE(std::string(cpu::isa_name(isa)));
        cpu::set_isa(isa);
        std::vector<float> act(std::size_t{rows} * cols);
        for (std::uint32_t r = 0; r < rows; ++r)
            cpu::swiglu(g.data() + off + r * stride, u.data() + off + r * stride, 1, cols, act.data() + r * cols);
        quant::QuantizedActivations a;
        quant::quantize_activations(act.data(), rows, cols, a);
        std::vector<std::uint32_t> want_q(qwords, 0);
        for (std::size_t i = 0; i < a.q.size(); ++i)
            want_q[i / 4] |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(a.q[i])) << (8 * (i % 4));
        std::vector<std::uint32_t> got_q(qwords);
        std::memcpy(got_q.data(), q1.data(), qwords * 4);
        CHECK(got_q == want_q);
        CHECK(differing(s1, a.scales) == 0);
    }
    cpu::set_isa(was);
}

TEST_CASE("vulkan fused conv_add_norm: a decode row's conv, residual add and norm equal sconv, ew ADD, rmsnorm") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    // D 1000 (the lanes' last pass short), a 4-tap conv, the row at batch row 2 of 4, the state
    // at an offset in a bigger buffer; and D 64 with 2 taps, and 1 tap (no state).
    struct Shape {
        std::uint32_t D, kernel, row, R, st_off;
    };
    for (const Shape s : {Shape{1000, 4, 2, 4, 37}, Shape{64, 2, 0, 1, 0}, Shape{130, 1, 1, 2, 5}}) {
        CAPTURE(s.D);
        CAPTURE(s.kernel);
        test_ops::Rand rnd(s.D + s.kernel);
        const std::uint32_t taps = s.kernel - 1;
        const std::vector<float> x = rnd.uniform(std::size_t{s.R} * s.D, -2.0f, 2.0f),
                                 a = rnd.uniform(x.size(), -2.0f, 2.0f),
                                 wc = rnd.uniform(std::size_t{s.D} * s.kernel, -0.5f, 0.5f),
                                 st = rnd.uniform(s.st_off + std::size_t{s.D} * taps + 3, -1.0f, 1.0f),
                                 wn = rnd.uniform(s.D, 0.5f, 1.5f);
        const vulkan::Buffer Wc = test_ops::input(ctx, wc), Wn = test_ops::input(ctx, wn);
        // Fused.
        vulkan::Buffer X1 = test_ops::input(ctx, x), A1 = test_ops::input(ctx, a), S1 = test_ops::input(ctx, st),
                       H1 = test_ops::input(ctx, std::vector<float>(x.size(), 0.0f));
        // Unfused: sconv in place on a (its span: the one row), x += a, h = rmsnorm(x).
        vulkan::Buffer X2 = test_ops::input(ctx, x), A2 = test_ops::input(ctx, a), S2 = test_ops::input(ctx, st),
                       H2 = test_ops::input(ctx, std::vector<float>(x.size(), 0.0f));
        const float eps = 1e-6f;
        vulkan::Frame f(ctx);
        f.begin();
        dev->ops->conv_add_norm(f, {s.row, s.D, s.kernel, s.st_off, eps}, X1, A1, Wc, S1, Wn, H1);
        dev->ops->sconv(f, {1, s.D, s.kernel, s.row * s.D, s.st_off}, A2, Wc, S2);
        f.barrier();
        dev->ops->ew(f, vulkan::EwOp::Add, X2, A2, u32(static_cast<std::int64_t>(x.size())));
        f.barrier();
        dev->ops->rmsnorm(f, {1, s.D, s.row * s.D, s.D, s.row * s.D, s.D, 0, eps, 0.0f}, X2, Wn, H2);
        f.run();
        const std::size_t n = x.size();
        const auto x1 = read(X1, n), x2 = read(X2, n), h1 = read(H1, n), h2 = read(H2, n);
        // The row's x and h as the unfused path's (whose ew ADD also ran over the other rows).
        const auto row = [&](const std::vector<float>& v) {
            return std::vector<float>(v.begin() + std::size_t{s.row} * s.D, v.begin() + std::size_t{s.row + 1} * s.D);
        };
        CHECK(differing(row(x1), row(x2)) == 0);
        // h: rmsnorm's arithmetic, its lanes' partials grouped by the wider workgroup.
        for (std::size_t i = 0; i < n; ++i) CHECK(std::abs(h1[i] - h2[i]) <= 2e-6f * std::abs(h2[i]) + 1e-30f);
        CHECK(differing(read(S1, st.size()), read(S2, st.size())) == 0);
        CHECK(differing(read(A1, n), a) == 0);  // the fused op leaves its input alone
        // Only the row's x and h changed.
        for (std::uint32_t r = 0; r < s.R; ++r) {
            if (r == s.row) continue;
            for (std::uint32_t c = 0; c < s.D; ++c) {
                const std::size_t i = std::size_t{r} * s.D + c;
                CHECK((x1[i] == x[i] && h1[i] == 0.0f));
            }
        }
    }
}

TEST_CASE("vulkan fused conv_add_norm: the MoE join as the conv's input equals moe_join, sconv, ew ADD, rmsnorm") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    // R 3 rows of D 200, the row 1; K 4 pairs a row; 0, 1 and 2 shared experts.
    const std::uint32_t D = 200, R = 3, K = 4, row = 1, kernel = 4, taps = kernel - 1;
    for (const std::uint32_t NS : {0u, 1u, 2u}) {
        CAPTURE(NS);
        test_ops::Rand rnd(100 + NS);
        const std::vector<float> x = rnd.uniform(std::size_t{R} * D, -2.0f, 2.0f),
                                 y = rnd.uniform(std::size_t{R} * K * D, -1.0f, 1.0f),
                                 rw = rnd.uniform(std::size_t{R} * K, 0.0f, 1.0f),
                                 sh = rnd.uniform(std::size_t{std::max(NS, 1u)} * R * D, -1.0f, 1.0f),
                                 sw = rnd.uniform(std::size_t{R} * std::max(NS, 1u), 0.0f, 1.0f),
                                 wc = rnd.uniform(std::size_t{D} * kernel, -0.5f, 0.5f),
                                 st = rnd.uniform(std::size_t{D} * taps, -1.0f, 1.0f), wn = rnd.uniform(D, 0.5f, 1.5f);
        const vulkan::Buffer Y = test_ops::input(ctx, y), RW = test_ops::input(ctx, rw), SH = test_ops::input(ctx, sh),
                             SW = test_ops::input(ctx, sw), Wc = test_ops::input(ctx, wc), Wn = test_ops::input(ctx, wn);
        const std::vector<float> zeros(x.size(), 0.0f);
        vulkan::Buffer X1 = test_ops::input(ctx, x), A1 = test_ops::input(ctx, zeros), S1 = test_ops::input(ctx, st),
                       H1 = test_ops::input(ctx, zeros);
        vulkan::Buffer X2 = test_ops::input(ctx, x), A2 = test_ops::input(ctx, zeros), S2 = test_ops::input(ctx, st),
                       H2 = test_ops::input(ctx, zeros);
        const float eps = 1e-6f;
        const vulkan::JoinInput join{&Y, &RW, &SH, &SW, K, NS, R * D};
        vulkan::Frame f(ctx);
        f.begin();
        dev->ops->conv_add_norm(f, {row, D, kernel, 0, eps}, X1, A1, Wc, S1, Wn, H1, &join);
        dev->ops->moe_join(f, {R * D, D, K, NS}, A2, Y, RW, SH, SW);
        f.barrier();
        dev->ops->sconv(f, {1, D, kernel, row * D, 0}, A2, Wc, S2);
        f.barrier();
        dev->ops->ew(f, vulkan::EwOp::Add, X2, A2, R * D);
        f.barrier();
        dev->ops->rmsnorm(f, {1, D, row * D, D, row * D, D, 0, eps, 0.0f}, X2, Wn, H2);
        f.run();
        const auto x1 = read(X1, x.size()), x2 = read(X2, x.size());
        CHECK(differing(std::vector<float>(x1.begin() + row * D, x1.begin() + (row + 1) * D),
                        std::vector<float>(x2.begin() + row * D, x2.begin() + (row + 1) * D)) == 0);
        const auto h1 = read(H1, x.size()), h2 = read(H2, x.size());
        for (std::size_t i = 0; i < h1.size(); ++i) CHECK(std::abs(h1[i] - h2[i]) <= 2e-6f * std::abs(h2[i]) + 1e-30f);
        CHECK(differing(read(S1, st.size()), read(S2, st.size())) == 0);
        CHECK(differing(read(A1, x.size()), zeros) == 0);  // a is not written
    }
}

TEST_CASE("vulkan fused conv_norm: the K rows' conv and per-head norm equal sconv then rmsnorm") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    struct Shape {
        std::uint32_t KV, hd, rows, kernel, first, R;
    };
    // A decode row, a span of 9 rows at batch row 3 (the convs' history crosses rows), hd 256
    // (two channels a lane), hd 48 (lanes idle), a 1-tap conv (no state).
    for (const Shape s : {Shape{2, 128, 1, 4, 0, 1}, Shape{8, 64, 9, 4, 3, 14}, Shape{1, 256, 3, 3, 1, 5},
                          Shape{4, 48, 2, 1, 0, 2}}) {
        CAPTURE(s.hd);
        CAPTURE(s.rows);
        test_ops::Rand rnd(s.KV * 1000 + s.hd);
        const std::uint32_t C = s.KV * s.hd, taps = s.kernel - 1, st_off = 11;
        const std::vector<float> x = rnd.uniform(std::size_t{s.R} * C, -2.0f, 2.0f),
                                 wc = rnd.uniform(std::size_t{C} * s.kernel, -0.5f, 0.5f),
                                 st = rnd.uniform(st_off + std::size_t{C} * taps + 2, -1.0f, 1.0f),
                                 wn = rnd.uniform(s.hd, 0.5f, 1.5f);
        const vulkan::Buffer Wc = test_ops::input(ctx, wc), Wn = test_ops::input(ctx, wn);
        vulkan::Buffer X1 = test_ops::input(ctx, x), S1 = test_ops::input(ctx, st);
        vulkan::Buffer X2 = test_ops::input(ctx, x), S2 = test_ops::input(ctx, st);
        const float eps = 1e-6f;
        vulkan::Frame f(ctx);
        f.begin();
        dev->ops->conv_norm(f, {s.rows, C, s.kernel, s.first * C, st_off, s.hd, eps}, X1, Wc, S1, Wn);
        dev->ops->sconv(f, {s.rows, C, s.kernel, s.first * C, st_off}, X2, Wc, S2);
        f.barrier();
        dev->ops->rmsnorm(f, {s.rows * s.KV, s.hd, s.first * C, s.hd, s.first * C, s.hd, 0, eps, 0.0f}, X2, Wn, X2);
        f.run();
        const auto x1 = read(X1, x.size());
        CHECK(differing(x1, read(X2, x.size())) == 0);
        CHECK(differing(read(S1, st.size()), read(S2, st.size())) == 0);
        // Rows outside the span untouched.
        for (std::size_t i = 0; i < x.size(); ++i)
            if (i < std::size_t{s.first} * C || i >= std::size_t{s.first + s.rows} * C) CHECK(x1[i] == x[i]);
    }
}

TEST_CASE("vulkan fused router: logits and top-k in one dispatch equal the router gemv then moe_route") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    struct Shape {
        std::uint32_t R, E, NS, K, D;
        bool bf16;
    };
    for (const Shape s : {Shape{1, 32, 1, 4, 1024, true}, Shape{3, 16, 2, 4, 64, false}, Shape{2, 64, 0, 6, 512, true}}) {
        CAPTURE(s.E);
        CAPTURE(s.bf16);
        REQUIRE(vulkan::Ops::router_fits(s.E, s.NS, s.D, s.bf16));
        test_ops::Rand rnd(s.E + s.D);
        const std::uint32_t rows = s.E + s.NS;
        const std::vector<float> h = rnd.uniform(std::size_t{s.R} * s.D, -1.0f, 1.0f),
                                 bias = rnd.uniform(s.E, -0.05f, 0.05f);
        std::vector<float> wf = rnd.uniform(std::size_t{rows} * s.D, -0.2f, 0.2f);
        std::vector<std::uint16_t> wb(wf.size());
        for (std::size_t i = 0; i < wf.size(); ++i) wb[i] = test_ops::bf16_top(wf[i]);
        const vulkan::Buffer W = s.bf16 ? test_ops::input(ctx, wb) : test_ops::input(ctx, wf);
        const vulkan::Buffer Hb = test_ops::input(ctx, h), Bias = test_ops::input(ctx, bias);
        vulkan::Buffer L(ctx, std::size_t{s.R} * rows * 4, vulkan::Buffer::Kind::Device);
        const std::size_t P = std::size_t{s.R} * s.K, S = std::max<std::size_t>(1, std::size_t{s.R} * s.NS);
        vulkan::Buffer E1(ctx, P * 4, vulkan::Buffer::Kind::Device), E2(ctx, P * 4, vulkan::Buffer::Kind::Device),
            W1(ctx, P * 4, vulkan::Buffer::Kind::Device), W2(ctx, P * 4, vulkan::Buffer::Kind::Device),
            S1(ctx, S * 4, vulkan::Buffer::Kind::Device), S2(ctx, S * 4, vulkan::Buffer::Kind::Device);
        const vulkan::RoutePush rp{s.R, s.E, s.NS, s.K, 2.5f};
        vulkan::Frame f(ctx);
        f.begin();
        dev->ops->moe_router_route(f, rp, s.bf16, W, s.D, Hb, Bias, {&E1}, W1, S1);
        dev->ops->gemv(f, s.bf16, W, Hb, L, {rows, s.D, s.R, s.D, 0, 0, s.D, 0, rows});
        f.barrier();
        dev->ops->moe_route(f, rp, {&L}, Bias, {&E2}, W2, S2);
        f.run();
        CHECK(differing(read(E1, P), read(E2, P)) == 0);  // expert ids, compared as bits
        CHECK(differing(read(W1, P), read(W2, P)) == 0);
        if (s.NS > 0) CHECK(differing(read(S1, S), read(S2, S)) == 0);
    }
    CHECK_FALSE(vulkan::Ops::router_fits(256, 2, 4096, true));  // Inkling-Small's: 2 MB, the gemv's
    CHECK_FALSE(vulkan::Ops::router_fits(32, 1, 1020, true));   // rows not a multiple of 16 bytes
}

TEST_CASE("vulkan gemm: silu(gate)·up through the tiled gemm equals ew's SWIGLU then gemm, and Ops::gemv's rule takes it") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    const std::uint32_t O = 100, I = 200, S = 40;
    test_ops::Rand rnd(77);
    const std::vector<float> g = rnd.uniform(std::size_t{S} * I, -4.0f, 4.0f), u = rnd.uniform(g.size(), -2.0f, 2.0f);
    std::vector<std::uint16_t> wb(std::size_t{O} * I);
    for (auto& v : wb) v = test_ops::bf16_top(rnd.uniform(-0.5f, 0.5f));
    const vulkan::Buffer W = test_ops::input(ctx, wb), G = test_ops::input(ctx, g), U = test_ops::input(ctx, u);
    const vulkan::Buffer P = device_swiglu(*dev, g, U);
    vulkan::Buffer Y1(ctx, std::size_t{S} * O * 4, vulkan::Buffer::Kind::Device),
        Y2(ctx, std::size_t{S} * O * 4, vulkan::Buffer::Kind::Device), Y3(ctx, std::size_t{S} * O * 4, vulkan::Buffer::Kind::Device);
    const vulkan::GemvPush p{O, I, S, I, 0, 0, I, 0, O};
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->gemm(f, true, W, G, Y1, p, &U);
    dev->ops->gemm(f, true, W, P, Y2, p);
    dev->ops->set_gemm_rows(S);  // the rule: S rows and more through gemm
    dev->ops->gemv(f, true, W, P, Y3, p);
    dev->ops->set_gemm_rows(0);
    f.run();
    const auto y1 = read(Y1, std::size_t{S} * O);
    CHECK(differing(y1, read(Y2, y1.size())) == 0);
    CHECK(differing(y1, read(Y3, y1.size())) == 0);
}
