// Parity of the integer expert shaders (a converted model's int8/int4 routed experts on the
// device) with the CPU's kernels, through the backend-ops harness's guarded buffers:
//
//   qact          the device's activation quantization against quant::quantize_activations:
//                 scales bit for bit, q within the bound docs/vulkan.md states (equal except
//                 next to a rounding tie, and exact ties always equal)
//   moe_gemv_int  fed the CPU's quantized activations, against cpu::int_product_rows on the
//                 pair's expert: bit for bit on lavapipe (fused fma), else within
//                 (blocks/16 + 6)·2⁻²²·Σ_b |s_w·s_x·isum_b|
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cpu/int_kernels.h"
#include "engine/cpu/kernels.h"
#include "engine/quant/quantize.h"
#include "engine/vulkan/frame.h"
#include "tests/vulkan/ops_harness.h"

using namespace inkling;
using test_ops::Guarded;
using test_ops::u32;

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// The CPU's quantized activation rows as the device holds them: 4 int8 a word, low byte first.
std::vector<std::uint32_t> packed_q(const quant::QuantizedActivations& a) {
    std::vector<std::uint32_t> out(static_cast<std::size_t>(a.rows * a.padded / 4), 0);
    for (std::size_t i = 0; i < a.q.size(); ++i)
        out[i / 4] |= (static_cast<std::uint32_t>(static_cast<std::uint8_t>(a.q[i]))) << (8 * (i % 4));
    return out;
}

// Element (o, i) of a quantized matrix as an integer.
std::int64_t weight_q(const quant::QuantizedMatrix& m, std::int64_t o, std::int64_t i) {
    const std::size_t at = static_cast<std::size_t>(o * m.padded + i);
    if (m.dtype == model::DType::I8) return static_cast<std::int8_t>(m.data[at]);
    const auto byte = static_cast<std::uint8_t>(m.data[at / 2]);
    const int v = at % 2 ? byte >> 4 : byte & 0xf;
    return v >= 8 ? v - 16 : v;
}

bool on_lavapipe(const vulkan::Context& ctx) { return ctx.info().name.find("llvmpipe") != std::string::npos; }

// ---- qact ----------------------------------------------------------------------------

// `rows` rows of `cols` floats at x_off, `x_stride` apart; `ties`: every block's values are
// multiples of s/2 with s = max/127 exact, so x/s lands on ties (k + 0.5) exactly.
void qact_case(std::int64_t rows, std::int64_t cols, std::int64_t x_off, std::int64_t x_stride, bool ties,
               std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t padded = quant::padded_cols(cols), blocks = padded / quant::kBlock;
    Guarded X(ctx, static_cast<std::size_t>(x_off + (rows - 1) * x_stride + cols + 3));
    Guarded Q(ctx, static_cast<std::size_t>(rows * blocks * 8 + 5), Guarded::Holds::Words);
    Guarded S(ctx, static_cast<std::size_t>(rows * blocks + 2));
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            float v;
            if (ties) {
                // s = 127/127 = 1 when the block holds ±127: halves are exact ties.
                v = (c % quant::kBlock == 0) ? 127.0f : static_cast<float>(rnd.between(-254, 254)) * 0.5f;
            } else {
                const std::int64_t kind = rnd.between(0, 9);
                v = kind == 0 ? 0.0f : kind == 1 ? rnd.uniform(-1e-3f, 1e-3f) : rnd.normal(kind == 2 ? 50.0f : 1.0f);
            }
            // An all-zero block now and then (s = 0, q = 0).
            if (!ties && (r + c / quant::kBlock) % 5 == 3) v = 0.0f;
            x[static_cast<std::size_t>(r * cols + c)] = v;
            X.set(static_cast<std::size_t>(x_off + r * x_stride + c), v);
        }
    quant::QuantizedActivations a;
    quant::quantize_activations(x.data(), rows, cols, a);
    const std::vector<std::uint32_t> want = packed_q(a);
    for (std::size_t i = 0; i < a.scales.size(); ++i) S.expect(i, a.scales[i], 0);
    for (Guarded* g : {&X, &Q, &S}) g->upload();
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->qact(f, {u32(rows), u32(cols), u32(blocks), u32(x_off), u32(x_stride)}, X.buffer(), Q.buffer(),
                   S.buffer());
    f.run();
    test_ops::check(X, "x");
    test_ops::check(S, "scales");
    // q: every element the host's, or one off where x/s is within 2⁻²⁰ of a tie (the bound).
    std::vector<float> got_f(Q.size());
    Q.buffer().read(got_f.data(), got_f.size() * 4);
    std::vector<std::uint32_t> got(got_f.size());
    std::memcpy(got.data(), got_f.data(), got.size() * 4);
    std::int64_t equal = 0, near_tie = 0, wrong = 0;
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t i = 0; i < padded; ++i) {
            const std::size_t at = static_cast<std::size_t>(r * padded + i);
            const auto g = static_cast<std::int8_t>(got[at / 4] >> (8 * (at % 4)));
            const std::int8_t w = a.q[at];
            if (g == w) {
                ++equal;
                continue;
            }
            const float s = a.scales[static_cast<std::size_t>(r * blocks + i / quant::kBlock)];
            const double v = i < cols ? static_cast<double>(x[static_cast<std::size_t>(r * cols + i)]) / s : 0.0;
            const double frac = std::abs(v - std::trunc(v));
            if (std::abs(g - w) == 1 && std::abs(frac - 0.5) < 0x1p-20 * std::max(1.0, std::abs(v))) ++near_tie;
            else if (wrong++ == 0) MESSAGE("q[" << r << "][" << i << "] = " << int(g) << ", want " << int(w));
        }
    for (std::size_t i = want.size(); i < got.size(); ++i) CHECK(got[i] == test_ops::kSentinelBits);
    CHECK(wrong == 0);
    if (ties) CHECK(near_tie == 0);  // exact ties: the quotient is exact, so is q
    CHECK(equal + near_tie == rows * padded);
}

// ---- moe_gemv_int --------------------------------------------------------------------

struct IntShape {
    const char* name;
    bool int4;
    std::int64_t group;                 // int4 group (a multiple of 32); int8: one scale a row
    std::int64_t O, I, R, K;            // pairs = R·K
    bool down;                          // x_div 1, else K
    std::int64_t E, slots, per_chunk;   // as backend_ops_test.cpp's MoeShape
    std::int64_t skip = -1;
};

void moe_int_case(const IntShape& m, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t O = m.O, I = m.I, P = m.R * m.K, x_div = m.down ? 1 : m.K, X_rows = m.down ? P : m.R;
    const std::int64_t padded = quant::padded_cols(I), blocks = padded / quant::kBlock;
    std::vector<std::int64_t> order(static_cast<std::size_t>(m.E));
    for (std::size_t e = 0; e < order.size(); ++e) order[e] = static_cast<std::int64_t>(e);
    std::shuffle(order.begin(), order.end(), rnd.g);
    std::vector<std::uint32_t> slot_of(order.size(), ~0u);
    for (std::int64_t s = 0; s < m.slots; ++s) slot_of[order[s]] = u32(s);
    std::vector<std::int64_t> route(static_cast<std::size_t>(P));
    std::vector<std::uint32_t> route_w(route.size());
    for (std::int64_t row = 0; row < m.R; ++row) {
        std::shuffle(order.begin(), order.end(), rnd.g);
        std::sort(order.begin(), order.begin() + m.K);
        for (std::int64_t k = 0; k < m.K; ++k) route[row * m.K + k] = order[k], route_w[row * m.K + k] = u32(order[k]);
    }
    // Activations with a spread of magnitudes, an all-zero row among them, quantized by the CPU.
    std::vector<float> x(static_cast<std::size_t>(X_rows * I));
    for (std::int64_t r = 0; r < X_rows; ++r)
        for (std::int64_t i = 0; i < I; ++i)
            x[static_cast<std::size_t>(r * I + i)] = r == 1 ? 0.0f : rnd.normal(i % 7 == 0 ? 8.0f : 1.0f);
    cpu::IntActivations xa;
    cpu::prepare_int_activations(cpu::active_isa(), true, x.data(), X_rows, I, xa);
    // Each slot's matrix quantized by the converter's functions, packed as the tier packs it.
    std::vector<quant::QuantizedMatrix> mats(static_cast<std::size_t>(m.slots));
    for (auto& q : mats) {
        std::vector<float> w = rnd.normal(static_cast<std::size_t>(O * I), 0.05f);
        for (std::int64_t c = 0; c < I; c += 5) w[static_cast<std::size_t>(c)] = 0.0f;
        if (O > 2) std::fill_n(w.begin() + I, I, 0.0f);  // an all-zero row: s_w = 0
        q = m.int4 ? quant::quantize_int4_groups(w.data(), O, I, m.group) : quant::quantize_int8_rows(w.data(), O, I);
    }
    const std::int64_t groups = mats[0].groups, gblocks = mats[0].group / quant::kBlock;
    const std::int64_t data_bytes = static_cast<std::int64_t>(mats[0].data.size());
    const std::int64_t slot_words = (data_bytes / 4 + O * groups + 3) / 4 * 4;
    struct Chunk {
        std::int64_t first, count;
        std::vector<std::uint32_t> words;
    };
    std::vector<Chunk> chunks;
    for (std::int64_t first = 0; first < m.slots; first += m.per_chunk) {
        Chunk c{first, std::min(m.per_chunk, m.slots - first), {}};
        c.words.assign(static_cast<std::size_t>(c.count * slot_words), 0xdeadbeefu);
        for (std::int64_t s = 0; s < c.count; ++s) {
            const auto& q = mats[static_cast<std::size_t>(first + s)];
            std::uint32_t* at = c.words.data() + s * slot_words;
            std::memcpy(at, q.data.data(), q.data.size());
            std::memcpy(at + data_bytes / 4, q.scales.data(), q.scales.size() * 4);
        }
        chunks.push_back(std::move(c));
    }
    Guarded Slots(ctx, static_cast<std::size_t>(m.E + 1), Guarded::Holds::Words),
        Route(ctx, static_cast<std::size_t>(P + 2), Guarded::Holds::Words), Y(ctx, static_cast<std::size_t>(P * O + 5));
    for (std::int64_t e = 0; e < m.E; ++e) Slots.set_word(e, slot_of[e]);
    for (std::int64_t q = 0; q < P; ++q) Route.set_word(q, route_w[q]);
    const bool bitwise = on_lavapipe(ctx);
    std::vector<float> want(static_cast<std::size_t>(O));
    for (std::int64_t q = 0; q < P; ++q) {
        const std::uint32_t s = slot_of[route[q]];
        if (s == ~0u || static_cast<std::int64_t>(s / m.per_chunk) == m.skip) continue;
        const model::Matrix w = mats[s].view();
        cpu::IntActivations one;
        const float* xr = x.data() + (q / x_div) * I;
        cpu::prepare_int_activations(cpu::active_isa(), true, xr, 1, I, one);
        cpu::int_product_rows(cpu::active_isa(), w, one, 0, O, want.data());
        for (std::int64_t o = 0; o < O; ++o) {
            double mag = 0;
            for (std::int64_t b = 0; b < blocks; ++b) {
                std::int64_t isum = 0;
                for (std::int64_t i = b * 32; i < (b + 1) * 32; ++i)
                    isum += weight_q(mats[s], o, i) * one.a.q[static_cast<std::size_t>(i)];
                mag += std::abs(static_cast<double>(w.row_scales(o)[b / gblocks]) * one.a.scales[b] * isum);
            }
            Y.expect(q * O + o, want[o], bitwise ? 0.0 : (blocks / 16.0 + 6) * 0x1p-22 * mag + 1e-30);
        }
    }
    for (Guarded* g : {&Slots, &Route, &Y}) g->upload();
    const vulkan::Buffer XQ = test_ops::input(ctx, packed_q(xa.a)), XS = test_ops::input(ctx, xa.a.scales);
    std::vector<vulkan::Buffer> W;
    for (const Chunk& c : chunks) W.push_back(test_ops::input(ctx, c.words));
    vulkan::Frame f(ctx);
    f.begin();
    for (std::size_t c = 0; c < chunks.size(); ++c) {
        if (static_cast<std::int64_t>(c) == m.skip) continue;
        const vulkan::MoeIntPush p{u32(O),      u32(P),      u32(x_div),   u32(chunks[c].first), u32(chunks[c].count),
                                   u32(blocks), u32(groups), u32(gblocks), u32(slot_words)};
        dev->ops->moe_gemv_int(f, m.int4, p, W[c], XQ, XS, Y.buffer(), {&Route.buffer()}, Slots.buffer());
    }
    f.run();
    const std::pair<const Guarded*, const char*> all[] = {{&Y, "y"}, {&Route, "route"}, {&Slots, "slots"}};
    for (auto [g, name] : all) test_ops::check(*g, name);
}

IntShape random_int(test_ops::Rand& r, std::string& name) {
    IntShape m{};
    m.int4 = r.between(0, 1) == 1;
    m.group = m.int4 ? 32 * r.between(1, 2) : 0;
    m.O = r.between(1, 70);
    m.I = r.between(1, 700);
    m.E = r.between(1, 12);
    test_ops::random_pairs(r, m, 6, 5);
    name = std::string("random ") + (m.int4 ? "int4 g" + str(m.group) : "int8") + (m.down ? " down" : " gate") +
           " O=" + str(m.O) + " I=" + str(m.I) + " R=" + str(m.R) + " K=" + str(m.K) + " E=" + str(m.E) +
           " slots=" + str(m.slots) + " per_chunk=" + str(m.per_chunk) + " skip=" + str(m.skip);
    return m;
}

}  // namespace

TEST_CASE("backend-ops qact: activations quantized as quant::quantize_activations") {
    // rows, cols, x_off, x_stride, ties
    const std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool> shapes[] = {
        {1, 1, 0, 1, false},    {1, 32, 0, 32, false},  {3, 33, 5, 40, false},  {2, 96, 0, 96, true},
        {4, 250, 7, 260, false}, {5, 1030, 0, 1030, false}, {9, 64, 3, 64, true}, {2, 4096, 0, 4096, false}};
    std::uint32_t seed = 1500;
    for (auto [rows, cols, off, stride, ties] : shapes) {
        ++seed;
        SUBCASE((str(rows) + " rows of " + str(cols) + " at " + str(off) + " stride " + str(stride) +
                 (ties ? ", exact ties" : ""))
                    .c_str()) {
            qact_case(rows, cols, off, stride, ties, seed);
        }
    }
    test_ops::Rand rnd(1600);
    for (int k = 0; k < 8; ++k) {
        const std::int64_t rows = rnd.between(1, 7), cols = rnd.between(1, 900), off = rnd.between(0, 9);
        const std::int64_t stride = cols + rnd.between(0, 11);
        ++seed;
        SUBCASE(("random " + str(rows) + " rows of " + str(cols) + " at " + str(off) + " stride " + str(stride)).c_str()) {
            qact_case(rows, cols, off, stride, false, seed);
        }
    }
}

TEST_CASE("backend-ops moe_gemv_int: int8 and int4 pairs through the slot table against cpu::int_product_rows") {
    // name, int4, group, O, I, R, K, down, E, slots, per_chunk, skip
    const std::vector<IntShape> shapes = {
        {"int8 1x1, one pair", false, 0, 1, 1, 1, 1, false, 1, 1, 1},
        {"int4 1x1, one pair", true, 32, 1, 1, 1, 1, false, 1, 1, 1},
        {"int8 gate 37x96, 3 rows of K 2", false, 0, 37, 96, 3, 2, false, 4, 4, 4},
        {"int4 gate 33x96, 2 of 5 experts on the host", true, 32, 33, 96, 2, 2, false, 5, 3, 3},
        {"int8 down 50x37 (a padded block), x a row a pair", false, 0, 50, 37, 2, 3, true, 6, 6, 6},
        {"int4 down 45x250, groups of 64 (a scale over two blocks, the last one half)", true, 64, 45, 250, 3, 2, true,
         8, 8, 8},
        {"int8 three chunks of 3, the middle one not dispatched", false, 0, 40, 64, 4, 4, false, 12, 9, 3, 1},
        {"int4 a short last chunk (5 slots by 3)", true, 32, 20, 136, 3, 4, false, 9, 5, 3},
        {"int8 down 17x1030: 33 blocks, lanes with 2 and 3 blocks", false, 0, 17, 1030, 2, 2, true, 4, 4, 2, 0},
        {"int4 gate 9x4096: 128 blocks, 8 a lane", true, 32, 9, 4096, 1, 2, false, 3, 3, 3},
    };
    std::uint32_t at = 1700;
    for (const IntShape& s : shapes) {
        ++at;
        SUBCASE(s.name) { moe_int_case(s, at); }
    }
    test_ops::Rand rnd(1800);
    for (int k = 0; k < 12; ++k) {
        std::string name;
        const IntShape s = random_int(rnd, name);
        ++at;
        SUBCASE(name.c_str()) { moe_int_case(s, at); }
    }
}
