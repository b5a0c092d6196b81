// The backend-ops parity harness, after ggml's test-backend-ops: every shader the chain
// records (vulkan/ops.h, plus copy.comp and Frame::copy) against the CPU op it stands in
// for, on seeded random inputs and shapes chosen for their edges — sizes that are not
// multiples of a workgroup or subgroup, the 16-byte and the tail paths of gemv, strided
// rows, row chunks, head dims 8 to 256, a sliding ring that has wrapped, tau, the KV
// split's host statistics, several spans in one batch, grid-stride loops, a span that
// overruns its mirror ring, the router's exact ties, expert pairs whose slot lies in
// another chunk or on the host, bindings at an offset — with every
// buffer guarded (ops_harness.h): out-of-bounds writes, missing writes and reads of
// slack all fail. One TEST_CASE per op family, one SUBCASE per shape.
//
// Tolerances, per element (|got − want| at most; random inputs of order 1):
//   gemv              1e-5 · Σ_i |x_i·w_i|        f32 sums in another order
//   rmsnorm           2e-6 · |want|               the CPU's mean square in double
//   ew add, scale     bit for bit                 one correctly rounded operation
//   ew swiglu         bit for bit                 shaders/pointwise.glsl: the CPU's steps
//   ew combine        1e-6 · (|b| + Σ_j |w_j·c_j|)  fused multiply-adds allowed
//   sconv             1e-6 · (|raw| + Σ_j |w_j·col_j|); its state bit for bit
//   relattn           1e-5                        averages of values in [−1, 1]
//   kvstore, copy     bit for bit
//   moe_route         bit for bit (ids and weights): the CPU's sigmoid and 1/z steps
//   moe_gemv          1e-5 · Σ_i |x_i·w_i|        as gemv
//   moe_join          1e-6 · (Σ_k |w_k·y_k| + Σ_j |sw_j·sh_j|); nothing to sum: 0 bit for bit
//
// Perf mode (for the GPU machine): INKLING_OPS_PERF=1 build/unit-tests -tc='backend-ops perf'
// prints µs per dispatch and GB/s of each op at an 8B-class model's sizes (docs/vulkan.md,
// "Parity harness"). Without the variable that case is skipped.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cpu/activations.h"
#include "engine/cpu/kernels.h"
#include "engine/forward/attention.h"
#include "engine/forward/attention_math.h"
#include "engine/forward/forward.h"
#include "engine/forward/session_state.h"
#include "engine/model/config.h"
#include "engine/model/tensor.h"
#include "engine/vulkan/frame.h"
#include "engine/vulkan/kernel.h"
#include "engine/vulkan/ops.h"
#include "tests/vulkan/ops_harness.h"

using namespace inkling;
using test_ops::Guarded;
using test_ops::u32;

namespace {

// ---- gemv ---------------------------------------------------------------------------

struct GemvShape {
    const char* name;
    bool bf16;
    std::int64_t O, I, S, stride, w_off, x_off, x_stride, y_off, y_stride;
    std::int64_t chunk = 0;   // > 0: rows in two buffers split at this row (the chain's DeviceMatrix)
    std::uint32_t groups = 0;  // > 0: dispatched with this many workgroups (the grid-stride loop)
};

void gemv_case(const GemvShape& g, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    // The weights: element w_off + o·stride + i is W[o][i]; the rest of the buffer random too.
    const std::int64_t welems = g.w_off + (g.O - 1) * g.stride + g.I + (g.bf16 ? 2 : 1);
    std::vector<float> wf = rnd.uniform(static_cast<std::size_t>(welems + (welems & 1)), -1.0f, 1.0f);
    std::vector<std::uint16_t> wb(wf.size());
    for (std::size_t i = 0; i < wf.size(); ++i) {
        wb[i] = test_ops::bf16_top(wf[i]);
        if (g.bf16) wf[i] = model::bf16_to_f32(wb[i]);
    }
    model::Matrix m;
    m.dtype = g.bf16 ? model::DType::BF16 : model::DType::F32;
    m.data = g.bf16 ? reinterpret_cast<const std::byte*>(wb.data() + g.w_off)
                    : reinterpret_cast<const std::byte*>(wf.data() + g.w_off);
    m.rows = g.O;
    m.cols = g.I;
    m.row_stride = g.stride;

    Guarded X(ctx, static_cast<std::size_t>(g.x_off + (g.S - 1) * g.x_stride + g.I + 3));
    std::vector<float> xc(static_cast<std::size_t>(g.S * g.I));  // the CPU's x: rows packed
    for (std::int64_t s = 0; s < g.S; ++s)
        for (std::int64_t i = 0; i < g.I; ++i) {
            const float v = rnd.uniform(-1.0f, 1.0f);
            xc[s * g.I + i] = v;
            X.set(g.x_off + s * g.x_stride + i, v);
        }
    std::vector<float> want(static_cast<std::size_t>(g.S * g.O));
    cpu::ThreadPool pool(1);
    cpu::matmul(xc.data(), g.S, m, want.data(), pool);

    // Y through gemv (the kernel, or Ops::gemv), G through the tiled gemm (Ops::gemm): the same
    // product and the same bound.
    Guarded Y(ctx, static_cast<std::size_t>(g.y_off + (g.S - 1) * g.y_stride + g.O + 5)), G(ctx, Y.size());
    for (std::int64_t s = 0; s < g.S; ++s)
        for (std::int64_t o = 0; o < g.O; ++o) {
            double mag = 0;
            for (std::int64_t i = 0; i < g.I; ++i)
                mag += std::abs(static_cast<double>(xc[s * g.I + i]) * wf[g.w_off + o * g.stride + i]);
            Y.expect(g.y_off + s * g.y_stride + o, want[s * g.O + o], 1e-5 * mag + 1e-30);
            G.expect(g.y_off + s * g.y_stride + o, want[s * g.O + o], 1e-5 * mag + 1e-30);
        }
    X.upload();
    Y.upload();
    G.upload();

    // Row chunks [first, first+rows), each in a buffer of its own that starts at its
    // first row's stride, so w_off keeps its meaning; y_off moves to the chunk's rows.
    struct Chunk {
        std::int64_t first, rows;
    };
    std::vector<Chunk> chunks = {{0, g.O}};
    if (g.chunk > 0) chunks = {{0, g.chunk}, {g.chunk, g.O - g.chunk}};
    std::vector<vulkan::Buffer> W;
    for (const Chunk& c : chunks) {
        const std::size_t from = static_cast<std::size_t>(c.first * g.stride);
        if (g.bf16) W.push_back(test_ops::input(ctx, std::vector<std::uint16_t>(wb.begin() + from, wb.end())));
        else W.push_back(test_ops::input(ctx, std::vector<float>(wf.begin() + from, wf.end())));
    }
    vulkan::Kernel raw(ctx, "gemv", 4, sizeof(vulkan::GemvPush), {g.bf16 ? 1u : 0u});
    vulkan::Frame f(ctx);
    f.begin();
    for (std::size_t k = 0; k < chunks.size(); ++k) {
        const vulkan::GemvPush p{u32(chunks[k].rows), u32(g.I),        u32(g.S),
                                 u32(g.stride),       u32(g.w_off),    u32(g.x_off),
                                 u32(g.x_stride),     u32(g.y_off + chunks[k].first), u32(g.y_stride)};
        if (g.groups == 0) {
            dev->ops->gemv(f, g.bf16, W[k], X.buffer(), Y.buffer(), p);
        } else {
            const vulkan::Binding b[] = {{&W[k]}, {&X.buffer()}, {&Y.buffer()}, {&X.buffer()}};
            f.dispatch(raw, b, &p, g.groups);
        }
        dev->ops->gemm(f, g.bf16, W[k], X.buffer(), G.buffer(), p);
    }
    f.run();
    test_ops::check(Y, "y");
    test_ops::check(G, "y through gemm");
    test_ops::check(X, "x");
}

// ---- rmsnorm ------------------------------------------------------------------------

struct NormShape {
    const char* name;
    std::int64_t segments, n, x_off, x_stride, o_off, o_stride;
    bool in_place;
    std::uint32_t mode = 0;
    float eps = 1e-6f, scale = 0.0f;
    std::uint32_t groups = 0;  // > 0: this many workgroups (the grid-stride loop)
};

void norm_case(const NormShape& s, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::vector<float> weight = rnd.uniform(static_cast<std::size_t>(s.n), 0.5f, 1.5f);
    const std::int64_t o_off = s.in_place ? s.x_off : s.o_off, o_stride = s.in_place ? s.x_stride : s.o_stride;
    Guarded X(ctx, static_cast<std::size_t>(s.x_off + (s.segments - 1) * s.x_stride + s.n + 4));
    Guarded O(ctx, s.in_place ? 1 : static_cast<std::size_t>(o_off + (s.segments - 1) * o_stride + s.n + 4));
    Guarded& out = s.in_place ? X : O;
    // Mode bit 2 (add_rmsnorm): x += a first, written back bit for bit as ew's ADD.
    const bool add = (s.mode & 2u) != 0;
    REQUIRE_FALSE((add && s.in_place));
    Guarded A(ctx, add ? X.size() : 1);
    std::vector<float> seg(static_cast<std::size_t>(s.n)), want(seg.size());
    for (std::int64_t g = 0; g < s.segments; ++g) {
        const auto at = static_cast<std::size_t>(s.x_off + g * s.x_stride);
        seg = rnd.uniform(seg.size(), -2.0f, 2.0f);
        X.set(at, seg);
        if (add) {
            const std::vector<float> a = rnd.uniform(seg.size(), -2.0f, 2.0f);
            A.set(at, a);
            for (std::size_t i = 0; i < seg.size(); ++i) {
                seg[i] += a[i];
                X.expect(at + i, seg[i], 0);
            }
        }
        cpu::rmsnorm(seg.data(), weight.data(), s.eps, s.n, want.data());
        for (std::int64_t i = 0; i < s.n; ++i) {
            const float w = (s.mode & 1u) != 0 ? want[i] * s.scale : want[i];
            out.expect(o_off + g * o_stride + i, w, 2e-6 * std::abs(w) + 1e-30);
        }
    }
    X.upload();
    O.upload();
    A.upload();
    const vulkan::Buffer W = test_ops::input(ctx, weight);
    const vulkan::NormPush p{u32(s.segments), u32(s.n),    u32(s.x_off), u32(s.x_stride), u32(o_off),
                             u32(o_stride),   s.mode,      s.eps,        s.scale};
    vulkan::Kernel raw(ctx, "rmsnorm", 4, sizeof(vulkan::NormPush));
    vulkan::Frame f(ctx);
    f.begin();
    if (s.groups > 0) {
        const vulkan::Binding b[] = {{&X.buffer()}, {&W}, {&out.buffer()}, {add ? &A.buffer() : &X.buffer()}};
        f.dispatch(raw, b, &p, s.groups);
    } else if (add) {
        dev->ops->add_rmsnorm(f, p, X.buffer(), A.buffer(), W, out.buffer());
    } else {
        dev->ops->rmsnorm(f, p, X.buffer(), W, out.buffer());
    }
    f.run();
    test_ops::check(X, "x");
    if (!s.in_place) test_ops::check(O, "out");
    if (add) test_ops::check(A, "a");
}

// ---- ew -----------------------------------------------------------------------------

// a op= b over n floats, a's buffer 9 floats longer (sentinel), b's 5 (random: not read).
void ew_case(vulkan::EwOp op, std::int64_t n, std::uint32_t groups, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const float scale = 0.37f;
    Guarded A(ctx, static_cast<std::size_t>(n + 9)), B(ctx, static_cast<std::size_t>(n + 5));
    for (std::int64_t i = 0; i < n + 5; ++i) B.set(i, rnd.uniform(-2.0f, 2.0f));
    for (std::int64_t i = 0; i < n; ++i) {
        const float a = rnd.uniform(-8.0f, 8.0f), b = B.at(i);
        A.set(i, a);
        switch (op) {
        case vulkan::EwOp::Add: A.expect(i, a + b, 0); break;
        case vulkan::EwOp::Scale: A.expect(i, a * scale, 0); break;
        default: {
            const float w = cpu::silu(a) * b;
            A.expect(i, w, 0);
        }
        }
    }
    A.upload();
    B.upload();
    vulkan::Kernel raw(ctx, "ew", 4, sizeof(vulkan::EwPush));
    vulkan::Frame f(ctx);
    f.begin();
    if (groups == 0) {
        dev->ops->ew(f, op, A.buffer(), B.buffer(), u32(n), scale);
    } else {
        const vulkan::EwPush p{static_cast<std::uint32_t>(op), u32(n), 1, 0, scale};
        const vulkan::Binding b[] = {{&A.buffer()}, {&B.buffer()}, {&B.buffer()}, {&B.buffer()}};
        f.dispatch(raw, b, &p, groups);
    }
    f.run();
    test_ops::check(A, "a");
    test_ops::check(B, "b");
}

// a = routed + Σ_j w[row][j]·shared[j] over `rows` rows of `width`, as the host's routed
// experts join the shared ones (forward/host_experts.cpp: the shared sum first).
void combine_case(std::int64_t rows, std::int64_t width, std::int64_t shared_n, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t n = rows * width;
    Guarded A(ctx, static_cast<std::size_t>(n + 7)), Routed(ctx, static_cast<std::size_t>(n + 1)),
        Shared(ctx, static_cast<std::size_t>(std::max<std::int64_t>(1, shared_n * n))),
        Wts(ctx, static_cast<std::size_t>(rows * shared_n + 1));
    for (std::int64_t i = 0; i < n; ++i) A.set(i, rnd.uniform(-1.0f, 1.0f)), Routed.set(i, rnd.uniform(-1.0f, 1.0f));
    for (std::int64_t i = 0; i < shared_n * n; ++i) Shared.set(i, rnd.uniform(-1.0f, 1.0f));
    for (std::int64_t i = 0; i < rows * shared_n; ++i) Wts.set(i, rnd.uniform(0.0f, 2.0f));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = i / width;
        float s = 0.0f;
        double mag = std::abs(Routed.at(i));
        for (std::int64_t j = 0; j < shared_n; ++j) {
            const float t = Wts.at(row * shared_n + j) * Shared.at(j * n + i);
            s += t;
            mag += std::abs(t);
        }
        const float want = Routed.at(i) + s;
        A.expect(i, want, shared_n == 0 ? 0.0 : 1e-6 * mag);
    }
    for (Guarded* g : {&A, &Routed, &Shared, &Wts}) g->upload();
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->combine(f, A.buffer(), Routed.buffer(), Shared.buffer(), Wts.buffer(), u32(n), u32(width), u32(shared_n));
    f.run();
    test_ops::check(A, "a");
    test_ops::check(Routed, "routed");
    test_ops::check(Shared, "shared");
    test_ops::check(Wts, "weights");
}

// ---- sconv --------------------------------------------------------------------------

// One span of `rows` rows at batch row `first` (rows before and after belong to other
// spans), the state of the second of three sessions.
void sconv_case(int kernel, std::int64_t channels, std::int64_t rows, std::int64_t first, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t taps = kernel - 1, st_off = channels * taps;
    const std::vector<float> w = rnd.uniform(static_cast<std::size_t>(channels * kernel), -0.5f, 0.5f);
    Guarded X(ctx, static_cast<std::size_t>((first + rows + 1) * channels)),
        St(ctx, static_cast<std::size_t>(3 * channels * taps + 1));
    for (std::size_t i = 0; i < X.size(); ++i) X.set(i, rnd.uniform(-1.0f, 1.0f));
    for (std::size_t i = 0; i + 1 < St.size(); ++i) St.set(i, rnd.uniform(-1.0f, 1.0f));
    std::vector<float> x(static_cast<std::size_t>(rows * channels)), st(static_cast<std::size_t>(channels * taps));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = X.at(first * channels + i);
    for (std::size_t i = 0; i < st.size(); ++i) st[i] = St.at(st_off + i);
    const std::vector<float> raw = x, st0 = st;
    forward::short_conv(x.data(), rows, channels, w.data(), kernel, st.data());
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t t = 0; t < rows; ++t) {
            double mag = std::abs(raw[t * channels + c]);
            for (std::int64_t j = 0; j < kernel; ++j) {  // col = (state, raw inputs)
                const std::int64_t at = t + j - taps;
                const float col = at < 0 ? st0[c * taps + taps + at] : raw[at * channels + c];
                mag += std::abs(static_cast<double>(w[c * kernel + j]) * col);
            }
            X.expect((first + t) * channels + c, x[t * channels + c], 1e-6 * mag);
        }
        for (std::int64_t j = 0; j < taps; ++j) St.expect(st_off + c * taps + j, st[c * taps + j], 0);
    }
    X.upload();
    St.upload();
    const vulkan::Buffer W = test_ops::input(ctx, w);
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->sconv(f, {u32(rows), u32(channels), u32(kernel), u32(first * channels), u32(st_off)}, X.buffer(), W,
                    St.buffer());
    f.run();
    test_ops::check(X, "x");
    test_ops::check(St, "state");
}

// ---- relattn ------------------------------------------------------------------------

struct AttnSpan {
    std::int64_t first, rows, pos0;
    std::int64_t mrows = 0;  // > 0 on a global layer: the device's ring of that many rows (the KV split)
};
struct AttnShape {
    const char* name;
    bool local;
    int H, KV, hd, window, d_rel, extent;  // extent: the global layer's bias bank (local: the window)
    double log_floor;                      // 0: no tau
    std::vector<AttnSpan> spans;
};

// How a case records relattn: by the rule (a partials buffer given: Ops::attn_split
// decides), the one-workgroup kernel forced, or the split forced with chunks of `chunk`
// positions (0: a third of the span's last row's, so its rows cross three chunks or
// fewer and the earlier rows of a span may leave a chunk empty). NoRoom: by the rule with
// a partials range one float short of the rule's split, so the one-workgroup kernel and
// the range untouched. must_split: the rule has to split every span of the case.
struct AttnPath {
    enum Kind { Rule, NoRoom, Plain, Split } kind;
    std::uint32_t chunk = 0;
    bool must_split = false;
};

// The CPU runs its attention (forward::attend) over the spans packed into a batch of
// their own; the device's batch leaves gaps between them and a row after the last, all
// sentinel. Each span's session holds its positions [0, pos0) in its cache; the device
// mirror holds only the positions its rows may read (the window's, or [lo, pos0) on a
// split layer, whose older ones come as the CPU's statistics), its other rows sentinel.
// Each span's partials get a range of their own in one guarded buffer (the spans are
// recorded with no barrier between): a split writes all of its range (anything but NaN:
// an empty chunk's max is −inf) and nothing else.
void attn_case(const AttnShape& a, std::uint32_t seed, AttnPath path) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    model::Config c;
    c.hidden = 8;
    c.layers = 1;
    c.kinds = {{a.local, false}};
    c.heads = c.swa_heads = a.H;
    c.kv_heads = c.swa_kv_heads = a.KV;
    c.head_dim = c.swa_head_dim = a.hd;
    c.window = a.window;
    c.d_rel = a.d_rel;
    c.rel_extent = a.extent;
    c.log_floor = a.log_floor;
    c.log_alpha = 0.3;
    const std::int64_t H = a.H, KV = a.KV, hd = a.hd, dr = a.d_rel, ext = c.layer_extent(0);

    std::int64_t R = 0, packed = 0;
    for (const AttnSpan& s : a.spans) R = std::max(R, s.first + s.rows), packed += s.rows;
    ++R;  // a guard row after the last span
    Guarded Q(ctx, static_cast<std::size_t>(R * H * hd)), K(ctx, static_cast<std::size_t>(R * KV * hd)),
        V(ctx, static_cast<std::size_t>(R * KV * hd)), Rr(ctx, static_cast<std::size_t>(R * H * dr + 1)),
        Tau(ctx, static_cast<std::size_t>(R)), Out(ctx, static_cast<std::size_t>(R * H * hd)),
        Hp(ctx, static_cast<std::size_t>(R * H * (hd + 2)));
    const std::vector<float> bank = rnd.normal(static_cast<std::size_t>(dr * ext), 0.5f);
    const vulkan::Buffer Bank = test_ops::input(ctx, bank);

    // The packed batch for the CPU; device row = span.first + s, packed row = its first + s.
    std::vector<float> q(static_cast<std::size_t>(packed * H * hd)), k(static_cast<std::size_t>(packed * KV * hd)),
        v(k.size()), r(static_cast<std::size_t>(packed * H * dr));
    std::vector<std::unique_ptr<forward::SessionState>> states;
    std::vector<forward::Span> spans;
    std::vector<std::int64_t> lo(a.spans.size(), 0), mrows(a.spans.size());
    std::vector<std::unique_ptr<Guarded>> Km, Vm;
    auto fill = [&](Guarded& g, std::vector<float>& cpu, std::int64_t width, std::int64_t dev_row,
                    std::int64_t cpu_row, std::int64_t rows, float sd, bool uniform) {
        for (std::int64_t i = 0; i < rows * width; ++i) {
            const float x = uniform ? rnd.uniform(-1.0f, 1.0f) : rnd.normal(sd);
            cpu[cpu_row * width + i] = x;
            g.set(dev_row * width + i, x);
        }
    };
    for (std::size_t b = 0; b < a.spans.size(); ++b) {
        const AttnSpan& s = a.spans[b];
        const std::int64_t at = spans.empty() ? 0 : spans.back().first + spans.back().rows;
        fill(Q, q, H * hd, s.first, at, s.rows, 2.0f, false);
        fill(K, k, KV * hd, s.first, at, s.rows, 2.0f, false);
        fill(V, v, KV * hd, s.first, at, s.rows, 0, true);
        fill(Rr, r, H * dr, s.first, at, s.rows, 1.0f, false);
        for (std::int64_t t = 0; t < s.rows; ++t) Tau.set(s.first + t, forward::attention_tau(c, 0, s.pos0 + t));
        // The session's cache: positions [0, pos0), position t at row t % rows (a ring
        // on the sliding layer, which keeps only the last `window`).
        states.push_back(std::make_unique<forward::SessionState>(forward::make_session(c, s.pos0 + s.rows)));
        forward::LayerState& L = states.back()->layers[0];
        states.back()->len = s.pos0;
        for (std::int64_t t = 0; t < s.pos0; ++t)
            for (std::int64_t g = 0; g < KV; ++g)
                for (std::int64_t e = 0; e < hd; ++e) {
                    const std::size_t i = static_cast<std::size_t>((g * L.rows + t % L.rows) * hd + e);
                    L.k[i] = rnd.normal(2.0f);
                    L.v[i] = rnd.uniform(-1.0f, 1.0f);
                }
        spans.push_back({states.back().get(), at, s.rows, s.pos0});
        mrows[b] = s.mrows > 0 ? s.mrows : L.rows;
        if (mrows[b] < L.rows) lo[b] = std::max<std::int64_t>(0, s.pos0 - mrows[b]);  // as the chain splits
        const std::int64_t oldest = a.local ? std::max<std::int64_t>(0, s.pos0 - a.window + 1) : lo[b];
        Km.push_back(std::make_unique<Guarded>(ctx, static_cast<std::size_t>(KV * mrows[b] * hd)));
        Vm.push_back(std::make_unique<Guarded>(ctx, static_cast<std::size_t>(KV * mrows[b] * hd)));
        for (std::int64_t t = oldest; t < s.pos0; ++t)
            for (std::int64_t g = 0; g < KV; ++g)
                for (std::int64_t e = 0; e < hd; ++e) {
                    const std::size_t from = static_cast<std::size_t>((g * L.rows + t % L.rows) * hd + e);
                    const std::size_t to = static_cast<std::size_t>((g * mrows[b] + t % mrows[b]) * hd + e);
                    Km.back()->set(to, L.k[from]);
                    Vm.back()->set(to, L.v[from]);
                }
    }

    const forward::AttentionView view{c, 0, bank.data(), spans, q.data(), k.data(), v.data(), r.data()};
    std::vector<float> want(q.size()), stats(static_cast<std::size_t>(packed * H * (hd + 2)));
    forward::attend(view, packed, nullptr, want.data());
    for (std::size_t b = 0; b < a.spans.size(); ++b) {
        const forward::Span& sp = spans[b];
        const std::int64_t first = a.spans[b].first;
        for (std::int64_t i = 0; i < sp.rows * H * hd; ++i)
            Out.expect(first * H * hd + i, want[sp.first * H * hd + i], 1e-5);
        if (lo[b] == 0) continue;
        forward::attend_stats(view, b, lo[b], nullptr, stats.data());
        for (std::int64_t i = 0; i < sp.rows * H * (hd + 2); ++i)
            Hp.set(first * H * (hd + 2) + i, stats[sp.first * H * (hd + 2) + i]);
    }
    // Each span's push and split, and its partials range (256 bytes apart at least, the
    // largest storage-buffer offset alignment; sentinel between).
    std::vector<vulkan::AttnPush> push;
    std::vector<vulkan::AttnSplit> split;
    std::vector<std::size_t> part_at, part_room;
    std::size_t part_floats = 0;
    for (std::size_t b = 0; b < a.spans.size(); ++b) {
        const AttnSpan& s = a.spans[b];
        const std::uint32_t window = a.local ? u32(a.window) : 0u;
        push.push_back({u32(s.first), u32(s.rows), u32(s.pos0), u32(H), u32(KV), u32(hd), u32(dr), u32(ext), window,
                        u32(mrows[b]), u32(lo[b]), 1.0f / static_cast<float>(hd)});
        const std::uint32_t last = vulkan::Ops::attn_split(push.back(), 1).chunks;  // the last row's positions
        split.push_back(path.kind == AttnPath::Rule || path.kind == AttnPath::NoRoom
                            ? vulkan::Ops::attn_split(push.back())
                        : path.kind == AttnPath::Plain
                            ? vulkan::AttnSplit{}
                            : vulkan::Ops::attn_split(push.back(), path.chunk ? path.chunk : (last + 2) / 3));
        if (path.must_split) CHECK_MESSAGE(split.back().chunks >= 2, "the rule keeps span " << b << " whole");
        const std::size_t need = vulkan::Ops::attn_part_floats(push.back(), split.back());
        part_at.push_back(part_floats);
        part_room.push_back(path.kind == AttnPath::NoRoom ? need - 1 : need);
        if (path.kind == AttnPath::NoRoom) split.back() = {};  // what must run: the one-workgroup kernel
        part_floats += (need + 64 + 63) / 64 * 64;
    }
    Guarded Part(ctx, part_floats + 5);
    for (std::size_t b = 0; b < a.spans.size(); ++b)
        for (std::size_t i = 0; i < vulkan::Ops::attn_part_floats(push[b], split[b]); ++i)
            Part.expect(part_at[b] + i, 0.0f, std::numeric_limits<double>::infinity());
    for (Guarded* g : {&Q, &K, &V, &Rr, &Tau, &Out, &Hp, &Part}) g->upload();
    for (auto& g : Km) g->upload();
    for (auto& g : Vm) g->upload();

    vulkan::Frame f(ctx);
    f.begin();
    for (std::size_t b = 0; b < a.spans.size(); ++b) {
        INFO("span " << b << ": " << split[b].chunks << " chunks of " << split[b].chunk << " positions");
        const vulkan::AttnBuffers bufs{&Q.buffer(),      &K.buffer(),  &V.buffer(),     &Km[b]->buffer(),
                                       &Vm[b]->buffer(), &Rr.buffer(), &Bank,           &Out.buffer(),
                                       {&Tau.buffer()},  &Hp.buffer(), {&Part.buffer(), part_at[b] * 4,
                                                                         std::max<std::size_t>(part_room[b], 1) * 4}};
        if (path.kind == AttnPath::Rule || path.kind == AttnPath::NoRoom) dev->ops->relattn(f, push[b], bufs);
        else dev->ops->relattn(f, push[b], bufs, split[b]);
    }
    f.run();
    test_ops::check(Out, "out");
    test_ops::check(Part, "partials");
    const std::pair<const Guarded*, const char*> inputs[] = {{&Q, "q"},     {&K, "k"},     {&V, "v"},
                                                             {&Rr, "r"},    {&Tau, "tau"}, {&Hp, "host_part"}};
    for (auto [g, name] : inputs) test_ops::check(*g, name);
    for (std::size_t b = 0; b < Km.size(); ++b) {
        test_ops::check(*Km[b], "k mirror");
        test_ops::check(*Vm[b], "v mirror");
    }
}

// ---- kvstore ------------------------------------------------------------------------

struct KvShape {
    const char* name;
    std::int64_t first, rows, pos0, KV, hd, mrows;
};

// One span's fresh rows at batch row `first` (the rows before and after are other spans')
// into its ring of `mrows` rows, sentinel before the op: row s lands at ring row
// (pos0 + s) % mrows of every KV head, and only the last min(rows, mrows) rows do, the
// earlier ones overwritten within the span on the host (chain.cpp's KV store).
void kvstore_case(const KvShape& k, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t R = k.first + k.rows + 1, row = k.KV * k.hd;
    Guarded Fresh(ctx, static_cast<std::size_t>(R * row + 3)), Ring(ctx, static_cast<std::size_t>(k.mrows * row + 5));
    for (std::int64_t i = 0; i < R * row; ++i) Fresh.set(i, rnd.uniform(-1.0f, 1.0f));
    for (std::int64_t s = k.rows - std::min(k.rows, k.mrows); s < k.rows; ++s)
        for (std::int64_t g = 0; g < k.KV; ++g)
            for (std::int64_t d = 0; d < k.hd; ++d)
                Ring.expect((g * k.mrows + (k.pos0 + s) % k.mrows) * k.hd + d,
                            Fresh.at((k.first + s) * row + g * k.hd + d), 0);
    Fresh.upload();
    Ring.upload();
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->kvstore(f, {u32(k.first), u32(k.rows), u32(k.pos0), u32(k.KV), u32(k.hd), u32(k.mrows)}, Fresh.buffer(),
                      Ring.buffer());
    f.run();
    test_ops::check(Ring, "ring");
    test_ops::check(Fresh, "fresh");
}

// ---- moe_route ----------------------------------------------------------------------

struct RouteShape {
    const char* name;
    std::int64_t E, K, NS, R;
    int ties = 0;          // 1: logits and biases from a few values each; 2: every expert alike
    bool offsets = false;  // logits and ids bound 256 bytes in (the chain's per-layer slices)
};

// The host's routing of one row: forward/host_experts.cpp's select_experts and
// HostExperts::route restated (route needs a whole model). Alike experts (the same logit
// and bias) tie exactly, and both sides give the tie to the lower id.
struct RowRoute {
    std::vector<std::int64_t> chosen;  // increasing id
    std::vector<float> w, sw;
};
RowRoute route_row(const float* lg, const std::vector<float>& bias, std::int64_t E, std::int64_t K, std::int64_t NS,
                   float scale) {
    std::vector<float> choice(static_cast<std::size_t>(E));
    std::vector<char> taken(static_cast<std::size_t>(E), 0);
    for (std::int64_t e = 0; e < E; ++e) choice[e] = cpu::sigmoid(lg[e]) + bias[e];
    RowRoute r;
    for (std::int64_t kk = 0; kk < K; ++kk) {
        std::int64_t best = -1;
        for (std::int64_t e = 0; e < E; ++e)
            if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
        taken[best] = 1;
        r.chosen.push_back(best);
    }
    float z = 0.0f;
    for (auto e : r.chosen) z += cpu::sigmoid(lg[e]);
    for (std::int64_t j = 0; j < NS; ++j) z += cpu::sigmoid(lg[E + j]);
    const float s = scale * cpu::reciprocal(z);
    std::sort(r.chosen.begin(), r.chosen.end());
    for (auto e : r.chosen) r.w.push_back(cpu::sigmoid(lg[e]) * s);
    for (std::int64_t j = 0; j < NS; ++j) r.sw.push_back(cpu::sigmoid(lg[E + j]) * s);
    return r;
}

// The device's sigmoids are the CPU's bits (shaders/pointwise.glsl), so even a near tie
// must come out as the host picks it, and every weight bit for bit.
void route_case(const RouteShape& r, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t E = r.E, K = r.K, NS = r.NS, R = r.R, W = E + NS, off = r.offsets ? 64 : 0;
    const float scale = 2.5f;
    static const float few_logits[] = {-1.0f, 0.5f, 2.0f}, few_biases[] = {0.0f, 0.125f};
    std::vector<float> bias(static_cast<std::size_t>(E));
    auto pick = [&](const float* few, std::int64_t n) { return few[rnd.between(0, n - 1)]; };
    for (auto& b : bias) b = r.ties == 0 ? rnd.uniform(-0.3f, 0.3f) : r.ties == 1 ? pick(few_biases, 2) : 0.0f;
    Guarded Logits(ctx, static_cast<std::size_t>(off + R * W + 3)), Bias(ctx, static_cast<std::size_t>(E + 2)),
        Ids(ctx, static_cast<std::size_t>(off + R * K + 3), Guarded::Holds::Words),
        Wts(ctx, static_cast<std::size_t>(R * K + 3)), Shared(ctx, static_cast<std::size_t>(R * NS + 3));
    Bias.set(0, bias);
    std::vector<float> lg(static_cast<std::size_t>(W));
    for (std::int64_t row = 0; row < R; ++row) {
        for (std::int64_t e = 0; e < W; ++e)
            lg[e] = r.ties == 0 || e >= E ? rnd.uniform(-4.0f, 4.0f) : r.ties == 1 ? pick(few_logits, 3) : 0.5f;
        const RowRoute want = route_row(lg.data(), bias, E, K, NS, scale);
        Logits.set(static_cast<std::size_t>(off + row * W), lg);
        for (std::int64_t k = 0; k < K; ++k) {
            Ids.expect_word(off + row * K + k, u32(want.chosen[k]));
            Wts.expect(row * K + k, want.w[k], 0);
        }
        for (std::int64_t j = 0; j < NS; ++j) Shared.expect(row * NS + j, want.sw[j], 0);
    }
    for (Guarded* g : {&Logits, &Bias, &Ids, &Wts, &Shared}) g->upload();
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->moe_route(f, {u32(R), u32(E), u32(NS), u32(K), scale}, {&Logits.buffer(), std::size_t(off) * 4},
                        Bias.buffer(), {&Ids.buffer(), std::size_t(off) * 4}, Wts.buffer(), Shared.buffer());
    f.run();
    const std::pair<const Guarded*, const char*> all[] = {
        {&Ids, "expert ids"}, {&Wts, "weights"}, {&Shared, "shared weights"}, {&Logits, "logits"}, {&Bias, "bias"}};
    for (auto [g, name] : all) test_ops::check(*g, name);
}

// ---- moe_gemv -----------------------------------------------------------------------

struct MoeShape {
    const char* name;
    bool bf16;
    std::int64_t O, I, R, K;             // pairs = R·K, each row's K experts distinct, increasing
    bool down;                           // x_div 1 (x: a row a pair), else K (gate/up: a row a token)
    std::int64_t E, slots, per_chunk;    // experts, device slots (the other experts ~0: host), slots a chunk
    std::int64_t skip = -1;              // >= 0: that chunk not dispatched (its pairs another frame's)
    bool route_off = false;              // the pairs' ids bound 256 bytes in (the chain's per-layer slice)
};

// The slots go to a random `slots` of the experts in random order, chunk c holding slots
// [c·per_chunk, …) packed O×I each in a buffer of its own, one dispatch a chunk. Pairs of an
// expert on the host, or in the chunk left out, keep their y rows' sentinel.
void moe_gemv_case(const MoeShape& m, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t O = m.O, I = m.I, P = m.R * m.K, x_div = m.down ? 1 : m.K, roff = m.route_off ? 64 : 0;
    std::vector<std::int64_t> order(static_cast<std::size_t>(m.E));
    for (std::size_t e = 0; e < order.size(); ++e) order[e] = static_cast<std::int64_t>(e);
    std::shuffle(order.begin(), order.end(), rnd.g);
    std::vector<std::uint32_t> slot_of(order.size(), ~0u);
    for (std::int64_t s = 0; s < m.slots; ++s) slot_of[order[s]] = u32(s);
    std::shuffle(order.begin(), order.end(), rnd.g);  // a permutation of its own for each row's experts below

    Guarded Slots(ctx, static_cast<std::size_t>(m.E + 1), Guarded::Holds::Words),
        Route(ctx, static_cast<std::size_t>(roff + P + 2), Guarded::Holds::Words),
        X(ctx, static_cast<std::size_t>((m.down ? P : m.R) * I + 3)), Y(ctx, static_cast<std::size_t>(P * O + 5));
    for (std::int64_t e = 0; e < m.E; ++e) Slots.set_word(e, slot_of[e]);
    std::vector<std::int64_t> route(static_cast<std::size_t>(P));
    for (std::int64_t row = 0; row < m.R; ++row) {
        std::shuffle(order.begin(), order.end(), rnd.g);
        std::sort(order.begin(), order.begin() + m.K);
        for (std::int64_t k = 0; k < m.K; ++k) {
            route[row * m.K + k] = order[k];
            Route.set_word(roff + row * m.K + k, u32(order[k]));
        }
    }
    for (std::int64_t i = 0; i + 3 < static_cast<std::int64_t>(X.size()); ++i) X.set(i, rnd.uniform(-1.0f, 1.0f));

    // The chunks' weights, bf16 as in gemv_case: the top half of each f32.
    struct Chunk {
        std::int64_t first, count;
        std::vector<float> wf;
        std::vector<std::uint16_t> wb;
    };
    std::vector<Chunk> chunks;
    for (std::int64_t first = 0; first < m.slots; first += m.per_chunk) {
        Chunk c{first, std::min(m.per_chunk, m.slots - first), {}, {}};
        c.wf = rnd.uniform(static_cast<std::size_t>((c.count * O * I + 1) / 2 * 2), -1.0f, 1.0f);
        c.wb.resize(c.wf.size());
        for (std::size_t i = 0; i < c.wf.size(); ++i) {
            c.wb[i] = test_ops::bf16_top(c.wf[i]);
            if (m.bf16) c.wf[i] = model::bf16_to_f32(c.wb[i]);
        }
        chunks.push_back(std::move(c));
    }
    cpu::ThreadPool pool(1);
    std::vector<float> want(static_cast<std::size_t>(O));
    for (std::int64_t q = 0; q < P; ++q) {
        const std::uint32_t s = slot_of[route[q]];
        if (s == ~0u || static_cast<std::int64_t>(s / m.per_chunk) == m.skip) continue;
        const Chunk& c = chunks[s / m.per_chunk];
        const std::int64_t at = (s - c.first) * O * I;
        model::Matrix w;
        w.dtype = m.bf16 ? model::DType::BF16 : model::DType::F32;
        w.data = m.bf16 ? reinterpret_cast<const std::byte*>(c.wb.data() + at)
                        : reinterpret_cast<const std::byte*>(c.wf.data() + at);
        w.rows = O;
        w.cols = I;
        w.row_stride = I;
        std::vector<float> x(static_cast<std::size_t>(I));
        for (std::int64_t i = 0; i < I; ++i) x[i] = X.at((q / x_div) * I + i);
        cpu::matmul(x.data(), 1, w, want.data(), pool);
        for (std::int64_t o = 0; o < O; ++o) {
            double mag = 0;
            for (std::int64_t i = 0; i < I; ++i) mag += std::abs(static_cast<double>(x[i]) * c.wf[at + o * I + i]);
            Y.expect(q * O + o, want[o], 1e-5 * mag + 1e-30);
        }
    }
    for (Guarded* g : {&Slots, &Route, &X, &Y}) g->upload();
    std::vector<vulkan::Buffer> W;
    for (const Chunk& c : chunks) W.push_back(m.bf16 ? test_ops::input(ctx, c.wb) : test_ops::input(ctx, c.wf));
    vulkan::Frame f(ctx);
    f.begin();
    for (std::size_t c = 0; c < chunks.size(); ++c) {
        if (static_cast<std::int64_t>(c) == m.skip) continue;
        const vulkan::MoeGemvPush p{u32(O), u32(I), u32(P), u32(x_div), u32(chunks[c].first), u32(chunks[c].count)};
        dev->ops->moe_gemv(f, m.bf16, p, W[c], X.buffer(), Y.buffer(), {&Route.buffer(), std::size_t(roff) * 4},
                           Slots.buffer());
    }
    f.run();
    const std::pair<const Guarded*, const char*> all[] = {{&Y, "y"}, {&X, "x"}, {&Route, "route"}, {&Slots, "slots"}};
    for (auto [g, name] : all) test_ops::check(*g, name);
}

// ---- moe_join -----------------------------------------------------------------------

// a = Σ_k w[row][k]·y[row·K + k] + Σ_j sw[row][j]·shared[j][row] over `rows` rows of D, in
// the host's order (forward/host_experts.cpp: the routed pairs by increasing id, the shared
// sum on its own, then added). a holds sentinel before: the op writes all of it.
void join_case(std::int64_t rows, std::int64_t D, std::int64_t K, std::int64_t NS, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::int64_t n = rows * D;
    Guarded A(ctx, static_cast<std::size_t>(n + 7)), Y(ctx, static_cast<std::size_t>(rows * K * D + 3)),
        Wts(ctx, static_cast<std::size_t>(rows * K + 1)), Shared(ctx, static_cast<std::size_t>(NS * n + 1)),
        Sw(ctx, static_cast<std::size_t>(rows * NS + 1));
    for (std::int64_t i = 0; i < rows * K * D; ++i) Y.set(i, rnd.uniform(-1.0f, 1.0f));
    for (std::int64_t i = 0; i < rows * K; ++i) Wts.set(i, rnd.uniform(0.0f, 1.0f));
    for (std::int64_t i = 0; i < NS * n; ++i) Shared.set(i, rnd.uniform(-1.0f, 1.0f));
    for (std::int64_t i = 0; i < rows * NS; ++i) Sw.set(i, rnd.uniform(0.0f, 1.0f));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = i / D, d = i % D;
        float r = 0.0f, s = 0.0f;
        double mag = 0;
        for (std::int64_t k = 0; k < K; ++k) {
            const float t = Wts.at(row * K + k) * Y.at((row * K + k) * D + d);
            r += t;
            mag += std::abs(t);
        }
        for (std::int64_t j = 0; j < NS; ++j) {
            const float t = Sw.at(row * NS + j) * Shared.at(j * n + i);
            s += t;
            mag += std::abs(t);
        }
        A.expect(i, NS > 0 ? r + s : r, 1e-6 * mag);  // nothing to sum: zero, bit for bit
    }
    for (Guarded* g : {&A, &Y, &Wts, &Shared, &Sw}) g->upload();
    vulkan::Frame f(ctx);
    f.begin();
    dev->ops->moe_join(f, {u32(n), u32(D), u32(K), u32(NS)}, A.buffer(), Y.buffer(), Wts.buffer(), Shared.buffer(),
                       Sw.buffer());
    f.run();
    const std::pair<const Guarded*, const char*> all[] = {
        {&A, "a"}, {&Y, "y"}, {&Wts, "weights"}, {&Shared, "shared"}, {&Sw, "shared weights"}};
    for (auto [g, name] : all) test_ops::check(*g, name);
}

// ---- copy ---------------------------------------------------------------------------

// copy.comp over `count` uvec4s with `groups` workgroups, both buffers bound 256 bytes in
// (the largest storage-offset alignment a device may ask), 16 floats of slack after.
void copy_shader_case(std::uint32_t count, std::uint32_t groups, std::uint32_t seed) {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    test_ops::Rand rnd(seed);
    const std::size_t floats = 64 + std::size_t{count} * 4 + 16;
    Guarded Src(ctx, floats), Dst(ctx, floats);
    for (std::size_t i = 0; i < floats; ++i) Src.set(i, rnd.uniform(-1.0f, 1.0f));
    for (std::size_t i = 0; i < std::size_t{count} * 4; ++i) Dst.expect(64 + i, Src.at(64 + i), 0);
    Src.upload();
    Dst.upload();
    vulkan::Kernel copy(ctx, "copy", 2, 4);
    vulkan::Frame f(ctx);
    f.begin();
    const vulkan::Binding b[] = {{&Src.buffer(), 256}, {&Dst.buffer(), 256}};
    f.dispatch(copy, b, &count, groups);
    f.run();
    test_ops::check(Dst, "dst");
    test_ops::check(Src, "src");
}

// ---- seeded random shapes, beside the edge cases of each table ------------------------

std::string str(std::int64_t v) { return std::to_string(v); }

GemvShape random_gemv(test_ops::Rand& r, std::string& name) {
    GemvShape g{};
    g.bf16 = r.between(0, 1) == 1;
    const std::int64_t even = g.bf16 ? 2 : 1;  // bf16 rows hold whole words
    g.O = r.between(1, 300);
    g.I = r.between(1, 2100 / even) * even;
    if (r.between(0, 1)) g.I = (g.I + 7) / 8 * 8;  // half of them on the 16-byte path
    g.S = r.between(0, 3) == 0 ? r.between(6, 70) : r.between(1, 5);  // gemm's tiles of 32 rows and their tails
    g.stride = g.I + r.between(0, 1) * r.between(0, 4) * even * 2;
    g.w_off = r.between(0, 1) * r.between(0, 4) * even * 2;
    g.x_off = r.between(0, 1) * r.between(0, 8);
    g.x_stride = g.I + r.between(0, 1) * r.between(0, 8);
    g.y_off = r.between(0, 9);
    g.y_stride = g.O + r.between(0, 4);
    g.chunk = g.O > 1 && r.between(0, 2) == 0 ? r.between(1, g.O - 1) : 0;
    name = std::string("random ") + (g.bf16 ? "bf16" : "f32") + " O=" + str(g.O) + " I=" + str(g.I) +
           " S=" + str(g.S) + " stride=" + str(g.stride) + " w_off=" + str(g.w_off) + " x_off=" + str(g.x_off) +
           " x_stride=" + str(g.x_stride) + " y_off=" + str(g.y_off) + " y_stride=" + str(g.y_stride) +
           " chunk=" + str(g.chunk);
    return g;
}

NormShape random_norm(test_ops::Rand& r, std::string& name) {
    NormShape s{};
    s.segments = r.between(1, 9);
    s.n = r.between(1, 3000);
    s.x_off = r.between(0, 5);
    s.x_stride = s.n + r.between(0, 3);
    s.o_off = r.between(0, 5);
    s.o_stride = s.n + r.between(0, 3);
    s.in_place = r.between(0, 1) == 1;
    s.mode = static_cast<std::uint32_t>(r.between(0, 1));
    if (!s.in_place && r.between(0, 1) == 1) s.mode |= 2u;  // add_rmsnorm
    s.eps = 1e-6f;
    s.scale = (s.mode & 1u) != 0 ? 0.25f : 0.0f;
    name = "random segments=" + str(s.segments) + " n=" + str(s.n) + " x_off=" + str(s.x_off) +
           " x_stride=" + str(s.x_stride) +
           (s.in_place ? std::string(" in place") : " o_off=" + str(s.o_off) + " o_stride=" + str(s.o_stride)) +
           " mode=" + str(s.mode);
    return s;
}

AttnShape random_attn(test_ops::Rand& r, std::string& name) {
    static const int dims[] = {8, 16, 24, 32, 48, 64, 100, 128, 192, 256};
    AttnShape a{};
    a.local = r.between(0, 1) == 1;
    a.KV = static_cast<int>(1 << r.between(0, 2));
    a.H = a.KV * static_cast<int>(1 << r.between(0, 1));
    a.hd = dims[r.between(0, 9)];
    a.window = a.local ? static_cast<int>(r.between(1, 200)) : 0;
    a.d_rel = static_cast<int>(r.between(1, 64));
    a.extent = a.local ? 0 : static_cast<int>(r.between(1, 400));
    a.log_floor = a.local || r.between(0, 1) ? 0.0 : static_cast<double>(r.between(1, 64));
    name = std::string("random ") + (a.local ? "sliding " + str(a.window) : "global extent " + str(a.extent)) +
           " H=" + str(a.H) + " KV=" + str(a.KV) + " hd=" + str(a.hd) + " d_rel=" + str(a.d_rel) +
           " log_floor=" + str(static_cast<std::int64_t>(a.log_floor)) + " spans";
    std::int64_t at = 0;
    for (std::int64_t b = 0, n = r.between(1, 3); b < n; ++b) {
        AttnSpan s{};
        s.first = at + r.between(0, 2);
        s.rows = r.between(1, 40);
        s.pos0 = r.between(0, 400);
        if (!a.local && s.pos0 > 0 && r.between(0, 2) == 0) s.mrows = r.between(1, s.pos0);
        at = s.first + s.rows;
        a.spans.push_back(s);
        name += " {" + str(s.first) + "," + str(s.rows) + "," + str(s.pos0);
        name += (s.mrows ? ",ring " + str(s.mrows) : std::string()) + "}";
    }
    return a;
}

KvShape random_kv(test_ops::Rand& r, std::string& name) {
    static const std::int64_t dims[] = {8, 16, 32, 64, 100, 128, 256};
    KvShape k{};
    k.first = r.between(0, 3);
    k.rows = r.between(1, 40);
    k.pos0 = r.between(0, 400);
    k.KV = std::int64_t{1} << r.between(0, 3);
    k.hd = dims[r.between(0, 6)];
    k.mrows = r.between(0, 1) ? r.between(1, 48) : k.pos0 + k.rows + r.between(0, 10);  // a sliding ring, or all
    name = "random first=" + str(k.first) + " rows=" + str(k.rows) + " pos0=" + str(k.pos0) + " KV=" + str(k.KV) +
           " hd=" + str(k.hd) + " mrows=" + str(k.mrows);
    return k;
}

RouteShape random_route(test_ops::Rand& r, std::string& name) {
    RouteShape s{};
    s.E = r.between(1, 160);
    s.K = r.between(1, std::min<std::int64_t>(16, s.E));
    s.NS = r.between(0, 2);
    s.R = r.between(1, 70);
    s.ties = static_cast<int>(r.between(0, 1));
    s.offsets = r.between(0, 1) == 1;
    name = "random E=" + str(s.E) + " K=" + str(s.K) + " NS=" + str(s.NS) + " R=" + str(s.R) +
           (s.ties ? " ties" : "") + (s.offsets ? " offsets" : "");
    return s;
}

MoeShape random_moe(test_ops::Rand& r, std::string& name) {
    MoeShape m{};
    m.bf16 = r.between(0, 1) == 1;
    m.O = r.between(1, 200);
    m.I = r.between(1, 600);
    if (r.between(0, 1)) m.I = (m.I + 7) / 8 * 8;  // half of them on the 16-byte path
    m.E = r.between(1, 40);
    test_ops::random_pairs(r, m, 8, 6);
    m.route_off = r.between(0, 1) == 1;
    name = std::string("random ") + (m.bf16 ? "bf16" : "f32") + (m.down ? " down" : " gate") + " O=" + str(m.O) +
           " I=" + str(m.I) + " R=" + str(m.R) + " K=" + str(m.K) + " E=" + str(m.E) + " slots=" + str(m.slots) +
           " per_chunk=" + str(m.per_chunk) + " skip=" + str(m.skip) + (m.route_off ? " route_off" : "");
    return m;
}

// One SUBCASE a shape, named by it: the table's, then `randoms` drawn by random(rnd, name)
// from a fixed seed; each shape's inputs come from a seed of their own.
template <class Shape, class Random, class Run>
void subcases(const std::vector<Shape>& table, int randoms, std::uint32_t seed, Random random, Run run) {
    std::uint32_t at = seed;
    for (const Shape& s : table) {
        ++at;
        SUBCASE(s.name) { run(s, at); }
    }
    test_ops::Rand rnd(seed + 1000);
    for (int k = 0; k < randoms; ++k) {
        std::string name;
        const Shape s = random(rnd, name);
        ++at;
        SUBCASE(name.c_str()) { run(s, at); }
    }
}

bool perf_wanted() {
    const char* e = std::getenv("INKLING_OPS_PERF");
    return e && std::string(e) == "1";
}

}  // namespace

TEST_CASE("backend-ops harness: a guarded buffer names a write past the range and a missing write") {
    auto* dev = test_ops::device();
    if (!dev) return;
    vulkan::Context& ctx = *dev->ctx;
    // copy.comp over 3 uvec4s where the test expects uvec4s 0, 1 and 3: uvec4 2 is written
    // where nothing should be, uvec4 3 is never written (its sentinel stays).
    Guarded Src(ctx, 16), Dst(ctx, 20);
    for (std::size_t i = 0; i < 16; ++i) Src.set(i, static_cast<float>(i));
    for (std::size_t i : {0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15}) Dst.expect(i, Src.at(i), 0);
    Src.upload();
    Dst.upload();
    vulkan::Kernel copy(ctx, "copy", 2, 4);
    vulkan::Frame f(ctx);
    f.begin();
    const std::uint32_t count = 3;
    const vulkan::Binding b[] = {{&Src.buffer()}, {&Dst.buffer()}};
    f.dispatch(copy, b, &count, 1);
    f.run();
    const Guarded::Verdict v = Dst.verdict();
    CHECK(v.clobbered == 4);
    CHECK(v.first_clobbered == "[8] = 8, was nan 0x7fa5a5a5");
    CHECK(v.wrong == 4);
    CHECK(v.first_wrong == "[12] = nan 0x7fa5a5a5, want 12 ± 0");
}

TEST_CASE("backend-ops gemv: f32 and bf16 against cpu::matmul") {
    const std::vector<GemvShape> shapes = {
        {"f32 1x1", false, 1, 1, 1, 1, 0, 0, 1, 0, 1},
        {"f32 37x96, O not a multiple of 4 (16-byte path)", false, 37, 96, 1, 96, 0, 0, 96, 0, 37},
        {"f32 64x250 S=3 (tail path), strided x and y", false, 64, 250, 3, 250, 0, 5, 256, 3, 70},
        {"f32 gate/up half: stride 2I, w_off I (16-byte path)", false, 45, 128, 2, 256, 128, 4, 132, 0, 45},
        {"f32 x_off 1 (tail path on a 16-byte row)", false, 20, 128, 2, 128, 0, 1, 129, 2, 21},
        {"f32 129x1030 S=4 (many passes of the lanes)", false, 129, 1030, 4, 1030, 0, 0, 1030, 0, 129},
        {"f32 I=7 (fewer columns than lanes)", false, 9, 7, 2, 7, 0, 3, 7, 1, 10},
        {"bf16 33x96 S=2 (16-byte path)", true, 33, 96, 2, 96, 0, 0, 96, 1, 34},
        {"bf16 5x250 S=3 (tail path)", true, 5, 250, 3, 250, 0, 2, 252, 0, 5},
        {"bf16 2x2", true, 2, 2, 1, 2, 0, 0, 2, 0, 2},
        {"bf16 sub-matrix: stride 2I+8, w_off I+8", true, 31, 200, 1, 408, 208, 0, 200, 4, 31},
        {"bf16 w_off 2 (tail path on a 16-byte row)", true, 17, 64, 2, 64, 2, 0, 64, 0, 17},
        {"bf16 77x1030 S=5", true, 77, 1030, 5, 1030, 0, 0, 1032, 0, 80},
        {"f32 chunked at row 29: the second chunk's y_off mid-output", false, 70, 64, 3, 64, 0, 0, 64, 10, 80, 29},
        {"bf16 chunked at row 13, S=2", true, 40, 136, 2, 136, 0, 0, 136, 0, 40, 13},
        {"f32 one workgroup strides over 37 rows", false, 37, 96, 2, 96, 0, 0, 96, 0, 37, 0, 1},
        {"bf16 two workgroups stride over 70 rows", true, 70, 250, 1, 250, 0, 0, 250, 0, 70, 0, 2},
        // gemm's tiles (32 rows × 64 outputs × 32 columns) and their tails in every direction
        {"bf16 130x1000 S=70 (three row tiles, two column tails)", true, 130, 1000, 70, 1000, 0, 0, 1000, 0, 130},
        {"f32 64x32 S=32 (one whole tile)", false, 64, 32, 32, 32, 0, 0, 32, 0, 64},
        {"bf16 gate/up half S=40: stride 2I, w_off I, x at an offset", true, 65, 96, 40, 192, 96, 3, 100, 2, 70},
        {"f32 300x33 S=33 chunked at row 100", false, 300, 33, 33, 33, 0, 0, 33, 0, 300, 100},
    };
    subcases(shapes, 24, 100, random_gemv, gemv_case);
}

TEST_CASE("backend-ops rmsnorm: segments against cpu::rmsnorm") {
    const std::vector<NormShape> shapes = {
        {"n=1", 1, 1, 0, 1, 0, 1, false},
        {"6 heads of 8, in place", 6, 8, 0, 8, 0, 8, true},
        {"7 heads of 100, in place at an offset", 7, 100, 5, 100, 0, 0, true},
        {"5 rows of 129 (one lane pass and one more), strided, a separate output", 5, 129, 3, 140, 7, 133, false},
        {"2 rows of 4096, mode 1 (the final norm x 1/24)", 2, 4096, 0, 4096, 0, 4096, false, 1, 1e-6f, 1.0f / 24},
        {"3 rows of 1000, eps 1e-5", 3, 1000, 0, 1000, 2, 1001, false, 0, 1e-5f},
        {"2 workgroups stride over 5 segments of 33", 5, 33, 1, 40, 0, 33, false, 0, 1e-6f, 0, 2},
        {"add_rmsnorm: a decode row of 1024", 1, 1024, 0, 1024, 0, 1024, false, 2},
        {"add_rmsnorm: 9 rows of 300 strided at offsets", 9, 300, 4, 310, 3, 301, false, 2},
        {"add_rmsnorm and scale: 2 rows of 129", 2, 129, 0, 129, 0, 129, false, 3, 1e-6f, 0.5f},
        {"add_rmsnorm: 2 workgroups stride over 7 segments of 65", 7, 65, 1, 70, 0, 65, false, 2, 1e-6f, 0, 2},
    };
    subcases(shapes, 12, 200, random_norm, norm_case);
}

TEST_CASE("backend-ops ew: add, swiglu, scale, combine against the CPU's arithmetic") {
    const std::pair<vulkan::EwOp, const char*> ops[] = {
        {vulkan::EwOp::Add, "add"}, {vulkan::EwOp::Swiglu, "swiglu"}, {vulkan::EwOp::Scale, "scale"}};
    std::uint32_t seed = 300;
    for (auto [op, name] : ops) {
        for (std::int64_t n : {1, 255, 257, 4099}) {
            ++seed;
            SUBCASE((std::string(name) + " n=" + std::to_string(n)).c_str()) { ew_case(op, n, 0, seed); }
        }
        ++seed;
        SUBCASE((std::string(name) + " n=1000, one workgroup strides").c_str()) { ew_case(op, 1000, 1, seed); }
    }
    for (auto [rows, width, shared] : {std::tuple{1, 7, 1}, std::tuple{3, 100, 2}, std::tuple{5, 257, 0},
                                       std::tuple{2, 4096, 3}}) {
        ++seed;
        SUBCASE(("combine " + std::to_string(rows) + " rows of " + std::to_string(width) + ", " +
                 std::to_string(shared) + " shared")
                    .c_str()) {
            combine_case(rows, width, shared, seed);
        }
    }
}

TEST_CASE("backend-ops sconv: the short conv against forward::short_conv") {
    struct Shape {
        int kernel;
        std::int64_t channels, rows, first;
    };
    std::vector<Shape> shapes = {{4, 1, 1, 0},   {4, 63, 3, 1},  {4, 65, 33, 2}, {2, 130, 5, 0},
                                 {9, 200, 4, 3}, {9, 64, 20, 1}, {1, 20, 3, 1},  {4, 1024, 2, 1}};
    test_ops::Rand shapes_rnd(1400);
    for (int k = 0; k < 12; ++k)
        shapes.push_back({static_cast<int>(shapes_rnd.between(1, 9)), shapes_rnd.between(1, 300),
                          shapes_rnd.between(1, 40), shapes_rnd.between(0, 3)});
    std::uint32_t seed = 400;
    for (const Shape& s : shapes) {
        ++seed;
        SUBCASE(("kernel " + str(s.kernel) + ", " + str(s.channels) + " channels, " + str(s.rows) + " rows at row " +
                 str(s.first))
                    .c_str()) {
            sconv_case(s.kernel, s.channels, s.rows, s.first, seed);
        }
    }
}

TEST_CASE("backend-ops relattn: attention against forward::attend (sliding, global, tau, host statistics)") {
    // name, local, H, KV, hd, window, d_rel, extent, log_floor, spans {first, rows, pos0, mrows}
    const std::vector<AttnShape> shapes = {
        {"global hd 8: one row at position 0", false, 2, 1, 8, 0, 4, 16, 0, {{0, 1, 0}}},
        {"global hd 16: 3 rows after 40 cached, distances past the extent", false, 4, 2, 16, 0, 4, 16, 0, {{1, 3, 40}}},
        {"global hd 64: 33 rows crossing the 128-position tile", false, 2, 2, 64, 0, 8, 64, 0, {{0, 33, 110}}},
        {"global hd 100, tau: 31 rows", false, 4, 1, 100, 0, 16, 1024, 16, {{2, 31, 50}}},
        {"global hd 128, tau: a prefill of 129 rows from 0", false, 2, 1, 128, 0, 8, 64, 32, {{0, 129, 0}}},
        {"global hd 256, tau: 5 rows at 260 (three tiles)", false, 2, 1, 256, 0, 64, 300, 16, {{0, 5, 260}}},
        {"sliding 16, hd 64: 3 rows at 40 (the ring has wrapped)", true, 4, 2, 64, 16, 4, 0, 0, {{0, 3, 40}}},
        {"sliding 8, hd 16: 20 rows at 5 wrap the ring within the span", true, 2, 1, 16, 8, 4, 0, 0, {{1, 20, 5}}},
        {"sliding 130, hd 128: 3 rows at 300 (a window past one tile)", true, 2, 2, 128, 130, 8, 0, 0, {{0, 3, 300}}},
        {"sliding 7, hd 8: 1 row at 3 (window not yet full)", true, 4, 4, 8, 7, 2, 0, 0, {{0, 1, 3}}},
        {"global hd 64, tau: a decode, a prefill, a gap, a chunk", false, 4, 2, 64, 0, 8, 128, 8,
         {{0, 1, 70}, {3, 9, 0}, {14, 2, 20}}},
        {"sliding 12, hd 32: three spans", true, 2, 1, 32, 12, 4, 0, 0, {{0, 4, 30}, {5, 1, 3}, {6, 6, 11}}},
        {"KV split: a ring of 4, 9 rows at 40, tau", false, 4, 2, 64, 0, 8, 64, 8, {{0, 9, 40, 4}}},
        {"KV split: a ring of 1, hd 128", false, 2, 1, 128, 0, 4, 32, 0, {{1, 2, 10, 1}}},
        {"KV split: one split span, one that still fits its ring", false, 2, 2, 16, 0, 4, 64, 16,
         {{0, 3, 50, 8}, {3, 2, 6, 7}}},
        {"KV split: 130 rows on the device past lo, hd 32", false, 2, 1, 32, 0, 4, 256, 64, {{0, 2, 300, 130}}},
        {"global hd 64, tau: 2 rows at 1500 (twelve tiles)", false, 4, 2, 64, 0, 16, 1024, 64, {{0, 2, 1500}}},
    };
    // Every shape through each path: the rule (a split: one chunk for most of these, many
    // for the longer ones), the one-workgroup kernel forced, the split in thirds and in
    // chunks of 20 positions (less than a tile of relattn_split.comp).
    const std::pair<const char*, AttnPath> paths[] = {{"by the rule", {AttnPath::Rule}},
                                                      {"one workgroup a head", {AttnPath::Plain}},
                                                      {"split in thirds", {AttnPath::Split}},
                                                      {"split in chunks of 20", {AttnPath::Split, 20}}};
    for (const auto& [what, path] : paths)
        SUBCASE(what) {
            subcases(shapes, 16, 500, random_attn,
                     [path](const AttnShape& s, std::uint32_t seed) { attn_case(s, seed, path); });
        }
}

TEST_CASE("backend-ops relattn: decode split over positions (flash-decoding) against forward::attend") {
    // name, local, H, KV, hd, window, d_rel, extent, log_floor, spans {first, rows, pos0, mrows}
    const std::vector<AttnShape> shapes = {
        {"1 row at 1500, global hd 64, tau", false, 4, 2, 64, 0, 16, 1024, 64, {{0, 1, 1500}}},
        {"1 row at 4095, global hd 128, GQA 8:1, tau", false, 8, 1, 128, 0, 16, 1024, 64, {{0, 1, 4095}}},
        {"1 row at 5000 on a sliding ring of 4096, hd 64", true, 4, 2, 64, 4096, 8, 0, 0, {{1, 1, 5000}}},
        {"1 row at 2000, global hd 256, d_rel 64", false, 2, 1, 256, 0, 64, 300, 16, {{0, 1, 2000}}},
        {"1 row at 3000, hd 48, GQA 8:1", false, 8, 1, 48, 0, 4, 512, 0, {{0, 1, 3000}}},
        {"KV split: 1 row at 3000 past a ring of 1024, host statistics, hd 128", false, 8, 1, 128, 0, 16, 1024, 64,
         {{0, 1, 3000, 1024}}},
        {"three sessions of one row (1500, 4095, 700), GQA 8:1, hd 128", false, 8, 1, 128, 0, 16, 1024, 64,
         {{0, 1, 1500}, {1, 1, 4095}, {3, 1, 700}}},
        {"three sessions of one row on a sliding ring of 512", true, 4, 1, 64, 512, 8, 0, 0,
         {{0, 1, 2000}, {1, 1, 300}, {2, 1, 511}}},
        {"two global sessions, one a KV split (ring of 300 at 900), hd 100", false, 4, 2, 100, 0, 8, 256, 16,
         {{0, 1, 900, 300}, {2, 1, 1200}}},
        {"4 rows at 2000 (a short chunk of a prompt), hd 32", false, 4, 2, 32, 0, 8, 128, 32, {{1, 4, 2000}}},
        {"a prefill of 70 rows from 0, hd 128", false, 4, 2, 128, 0, 8, 64, 16, {{0, 70, 0}}},
    };
    // The rule must split each of these spans: "by the rule" checks it and tests its split.
    const std::pair<const char*, AttnPath> paths[] = {{"by the rule", {AttnPath::Rule, 0, true}},
                                                      {"by the rule, its partials range one float short",
                                                       {AttnPath::NoRoom, 0, true}},
                                                      {"one workgroup a head", {AttnPath::Plain}},
                                                      {"split in chunks of 100", {AttnPath::Split, 100}},
                                                      {"split in chunks of 17", {AttnPath::Split, 17}}};
    for (const auto& [what, path] : paths)
        SUBCASE(what) {
            std::uint32_t seed = 1500;
            for (const AttnShape& a : shapes) {
                ++seed;
                SUBCASE(a.name) { attn_case(a, seed, path); }
            }
        }
}

TEST_CASE("backend-ops relattn: the split rule and the partials it needs") {
    auto push = [](std::uint32_t rows, std::uint32_t pos0, std::uint32_t H, std::uint32_t hd, std::uint32_t window,
                   std::uint32_t lo, std::uint32_t d_rel = 16) {
        return vulkan::AttnPush{0, rows, pos0, H, H, hd, d_rel, 1024, window, window ? window : pos0 + rows, lo,
                                1.0f / static_cast<float>(hd)};
    };
    // Decode of 32 heads at 32768 global positions: 1024 workgroups, 32 chunks a head.
    // (With ⌊1024 / (rows × heads)⌋ chunks at most, up to 1024 rows × heads fit the bound.)
    const vulkan::AttnSplit d = vulkan::Ops::attn_split(push(1, 32767, 32, 128, 0, 0));
    CHECK(d.chunks == 32);
    CHECK(d.chunk == 1024);
    // The sliding window bounds the positions, the KV split's lo too: 4096 and 1000 visible.
    CHECK(vulkan::Ops::attn_split(push(1, 32767, 32, 128, 4096, 0)).chunk == 128);
    CHECK(vulkan::Ops::attn_split(push(1, 32767, 8, 128, 0, 31768)).chunks == 31);  // ⌊1000 / 32⌋ chunks
    // Chunks of 32 positions at least: 31 visible make one chunk, 64 two.
    CHECK(vulkan::Ops::attn_split(push(1, 30, 8, 128, 0, 0)).chunks == 1);
    CHECK(vulkan::Ops::attn_split(push(1, 63, 8, 128, 0, 0)).chunks == 2);
    // A prefill of 128 rows × 32 heads is 4096 workgroups already: one chunk of every position.
    const vulkan::AttnSplit pre = vulkan::Ops::attn_split(push(128, 3968, 32, 128, 0, 0));
    CHECK(pre.chunks == 1);
    CHECK(pre.chunk == 4096);
    // Past 4096 rows × heads, the split shader's head dims or d_rel: the one-workgroup kernel.
    CHECK(vulkan::Ops::attn_split(push(129, 3968, 32, 128, 0, 0)).chunks == 0);
    CHECK(vulkan::Ops::attn_split(push(1, 1000, 8, 300, 0, 0)).chunks == 0);
    CHECK(vulkan::Ops::attn_split(push(1, 1000, 8, 128, 0, 0, 65)).chunks == 0);
    CHECK(vulkan::Ops::attn_part_floats(push(1, 1000, 8, 300, 0, 0)) == 0);
    // Over many shapes: the chunks cover the last row's positions, none starts past them,
    // and up to 1024 rows × heads the partials fit attn_part_floats_max.
    for (std::uint32_t rows : {1u, 2u, 3u, 7u, 16u, 100u, 511u, 512u, 600u})
        for (std::uint32_t H : {1u, 2u, 5u, 8u, 32u, 64u})
            for (std::uint32_t pos0 : {0u, 31u, 63u, 64u, 127u, 1000u, 4095u, 100000u})
                for (std::uint32_t window : {0u, 512u})
                    for (std::uint32_t hd : {8u, 128u, 256u}) {
                        const vulkan::AttnPush p = push(rows, pos0, H, hd, window, 0);
                        const vulkan::AttnSplit s = vulkan::Ops::attn_split(p);
                        const std::uint32_t n = vulkan::Ops::attn_split(p, 1).chunks;
                        INFO(rows << " rows at " << pos0 << ", " << H << " heads of " << hd << ", window " << window);
                        if (rows * H <= 1024)
                            CHECK(vulkan::Ops::attn_part_floats(p) <= vulkan::Ops::attn_part_floats_max(hd));
                        CHECK((s.chunks == 0) == (rows * H > 4096));
                        if (s.chunks == 0) continue;
                        CHECK(std::uint64_t{s.chunk} * s.chunks >= n);
                        CHECK(std::uint64_t{s.chunk} * (s.chunks - 1) < n);
                        CHECK((s.chunks == 1 || s.chunk >= 32));
                    }
}

TEST_CASE("backend-ops kvstore: a span's fresh K/V rows into the mirror ring, the overrun rows skipped") {
    // name, first, rows, pos0, KV, hd, mrows
    const std::vector<KvShape> shapes = {
        {"decode: 1 row at 0, a ring of 16, hd 8", 0, 1, 0, 1, 8, 16},
        {"decode at 40 in a ring of 16 (ring row 8), the span at batch row 2", 2, 1, 40, 2, 64, 16},
        {"a prefill of 33 rows from 0 into a ring of 64, hd 128 (33 workgroups)", 0, 33, 0, 2, 128, 64},
        {"20 rows at 5 overrun a ring of 8: the first 12 skipped", 1, 20, 5, 1, 16, 8},
        {"8 rows at 3 fill a ring of 8 exactly, wrapping", 0, 8, 3, 4, 32, 8},
        {"a ring of 1: only the last of 5 rows", 3, 5, 10, 2, 100, 1},
        {"8 KV heads of 256: 3 rows at 1022 wrap a ring of 1024", 1, 3, 1022, 8, 256, 1024},
        {"129 rows at 200 overrun a ring of 100, hd 48", 2, 129, 200, 1, 48, 100},
    };
    subcases(shapes, 10, 700, random_kv, kvstore_case);
}

TEST_CASE("backend-ops moe_route: the router's top-k against the host's select_experts and route weights") {
    // name, E, K, NS, R, ties, offsets
    const std::vector<RouteShape> shapes = {
        {"E 1, K 1, no shared, 1 row", 1, 1, 0, 1},
        {"E 7, K 4, 1 shared, 3 rows", 7, 4, 1, 3},
        {"E 7, K 7: every expert chosen, 2 shared", 7, 7, 2, 3},
        {"E 32, K 8, 2 shared, 65 rows (two workgroups)", 32, 8, 2, 65},
        {"E 129, K 16, 1 shared, 3 rows", 129, 16, 1, 3},
        {"E 16, K 16, no shared", 16, 16, 0, 1},
        {"E 129, K 1, 2 shared, 65 rows, logits and ids bound 256 bytes in", 129, 1, 2, 65, 0, true},
        {"ties: E 32, K 8, logits and biases from a few values, 65 rows", 32, 8, 1, 65, 1},
        {"ties: E 129, K 16, a few values, bound 256 bytes in", 129, 16, 2, 3, 1, true},
        {"ties: E 7, K 4, every expert alike: ids 0 to 3", 7, 4, 0, 3, 2},
    };
    subcases(shapes, 10, 800, random_route, route_case);
}

TEST_CASE("backend-ops moe_gemv: pairs through the slot table against cpu::matmul on their expert's matrix") {
    // name, bf16, O, I, R, K, down, E, slots, per_chunk, skip, route_off
    const std::vector<MoeShape> shapes = {
        {"f32 1x1, one pair", false, 1, 1, 1, 1, false, 1, 1, 1},
        {"f32 gate 37x96 (16-byte path), 3 rows of K 2, every expert in one chunk", false, 37, 96, 3, 2, false, 4, 4,
         4},
        {"f32 down 50x37 (tail path), x a row a pair", false, 50, 37, 2, 3, true, 6, 6, 6},
        {"bf16 gate 33x96 (16-byte path), 2 of 5 experts on the host", true, 33, 96, 2, 2, false, 5, 3, 3},
        {"bf16 down 45x250 (tail path)", true, 45, 250, 3, 2, true, 8, 8, 8},
        {"bf16 7x9: slots starting at odd elements, two chunks", true, 7, 9, 2, 2, false, 4, 4, 2},
        {"f32 three chunks of 3, the middle one not dispatched", false, 40, 64, 4, 4, false, 12, 9, 3, 1},
        {"bf16 a short last chunk (5 slots by 3), 4 experts on the host", true, 20, 136, 3, 4, false, 9, 5, 3},
        {"bf16 65 rows of K 8 over 32 experts, 16 slots in 4 chunks, ids 256 bytes in", true, 64, 128, 65, 8, false,
         32, 16, 4, -1, true},
        {"f32 down 129x1030 (many lane passes), the first chunk not dispatched", false, 129, 1030, 2, 2, true, 4, 4, 2,
         0},
    };
    subcases(shapes, 12, 900, random_moe, moe_gemv_case);
}

TEST_CASE("backend-ops moe_join: routed pairs and shared experts joined in the host's order") {
    std::uint32_t seed = 1000;
    for (auto [rows, D, K, NS] : {std::tuple{1, 1, 0, 0}, std::tuple{3, 7, 1, 0}, std::tuple{2, 100, 0, 1},
                                  std::tuple{5, 257, 4, 2}, std::tuple{1, 4100, 8, 1}, std::tuple{65, 33, 16, 2},
                                  std::tuple{7, 300, 2, 0}, std::tuple{4, 1000, 1, 1}}) {
        ++seed;
        SUBCASE((str(rows) + " rows of " + str(D) + ", K " + str(K) + ", " + str(NS) + " shared").c_str()) {
            join_case(rows, D, K, NS, seed);
        }
    }
}

TEST_CASE("backend-ops copy: copy.comp and Frame::copy move every byte and no other") {
    std::uint32_t seed = 600;
    for (auto [count, groups] : {std::pair{1u, 1u}, std::pair{255u, 1u}, std::pair{257u, 2u}, std::pair{1000u, 3u},
                                 std::pair{4099u, 17u}}) {
        ++seed;
        SUBCASE(("copy.comp " + std::to_string(count) + " uvec4s, " + std::to_string(groups) + " workgroups").c_str()) {
            copy_shader_case(count, groups, seed);
        }
    }
    SUBCASE("Frame::copy: K/V rows scattered into a ring at 4-byte offsets") {
        auto* dev = test_ops::device();
        if (!dev) return;
        vulkan::Context& ctx = *dev->ctx;
        test_ops::Rand rnd(seed + 1);
        // Four rows of 7 floats from a packed batch into a ring of 4 rows 3 floats into its
        // buffer, from ring row 2 on (so it wraps: rows 2, 3, 0, 1), then one float alone.
        Guarded Src(ctx, 40), Dst(ctx, 3 + 4 * 7 + 5);
        for (std::size_t i = 0; i < Src.size(); ++i) Src.set(i, rnd.uniform(-1.0f, 1.0f));
        for (std::size_t s = 0; s < 4; ++s)
            for (std::size_t e = 0; e < 7; ++e) Dst.expect(3 + (s + 2) % 4 * 7 + e, Src.at(s * 7 + e), 0);
        Dst.expect(1, Src.at(39), 0);
        Src.upload();
        Dst.upload();
        vulkan::Frame f(ctx);
        f.begin();
        for (std::size_t s = 0; s < 4; ++s)
            f.copy(Src.buffer(), s * 7 * 4, Dst.buffer(), (3 + (s + 2) % 4 * 7) * 4, 7 * 4);
        f.copy(Src.buffer(), 39 * 4, Dst.buffer(), 1 * 4, 4);
        f.run();
        test_ops::check(Dst, "dst");
        test_ops::check(Src, "src");
    }
}

// ---- perf ---------------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

// µs a dispatch: the best of three frames of `reps` dispatches (a barrier after each, as
// in the chain) less the best of three empty ones (the submit and the wait), over reps.
template <class Record>
double us_per_dispatch(vulkan::Context& ctx, int reps, Record record) {
    vulkan::Frame f(ctx);
    auto frame_us = [&](int n) {
        f.begin();
        for (int i = 0; i < n; ++i) record(f), f.barrier();
        const auto t0 = Clock::now();
        f.run();
        return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    frame_us(reps);  // warm-up
    double full = 1e300, empty = 1e300;
    for (int k = 0; k < 3; ++k) full = std::min(full, frame_us(reps)), empty = std::min(empty, frame_us(0));
    return std::max(0.0, full - empty) / reps;
}

// One line of the table: `bytes` is what the op must move at least (read + written).
void perf_line(const std::string& what, double bytes, double us) {
    std::printf("  %-50s %10.1f us %9.1f GB/s\n", what.c_str(), us, bytes / us / 1e3);
}

std::string rows_of(std::uint32_t rows, std::uint32_t n) {
    return str(rows) + (rows == 1 ? " row of " : " rows of ") + str(n);
}

vulkan::Buffer zeros(vulkan::Context& ctx, std::size_t floats) {
    vulkan::Buffer b(ctx, floats * 4, vulkan::Buffer::Kind::Device);
    b.fill_zero();
    return b;
}

// An 8B-class model: hidden 4096, MLP 14336, 32 heads over 8 KV heads of 128.
constexpr std::uint32_t kD = 4096, kF = 14336, kH = 32, kKV = 8, kHd = 128, kDrel = 16, kExt = 1024;

void perf_gemv(const test_ops::Device& dev) {
    vulkan::Context& ctx = *dev.ctx;
    const vulkan::Buffer X = zeros(ctx, std::size_t{8} * kF), Y = zeros(ctx, std::size_t{8} * kF);
    struct G {
        const char* what;
        bool bf16;
        std::uint32_t O, I, S;
    };
    const G shapes[] = {{"gemv bf16 q_proj 4096x4096 S=1", true, kD, kD, 1},
                        {"gemv bf16 k_proj 1024x4096 S=1", true, kKV * kHd, kD, 1},
                        {"gemv bf16 gate 14336x4096 S=1", true, kF, kD, 1},
                        {"gemv bf16 down 4096x14336 S=1", true, kD, kF, 1},
                        {"gemv bf16 gate 14336x4096 S=8", true, kF, kD, 8},
                        {"gemv f32 gate 14336x4096 S=1", false, kF, kD, 1}};
    for (const G& g : shapes) {
        const std::size_t elems = std::size_t{g.O} * g.I, bytes = elems * (g.bf16 ? 2 : 4);
        if (bytes > ctx.info().max_storage_range) {
            std::printf("  %-50s skipped: %zu MiB is past one binding's range\n", g.what, bytes >> 20);
            continue;
        }
        const vulkan::Buffer W = zeros(ctx, (bytes + 3) / 4);
        const vulkan::GemvPush p{g.O, g.I, g.S, g.I, 0, 0, g.I, 0, g.O};
        const double us = us_per_dispatch(ctx, 20, [&](vulkan::Frame& f) { dev.ops->gemv(f, g.bf16, W, X, Y, p); });
        perf_line(g.what, static_cast<double>(bytes) + 4.0 * g.S * (g.I + g.O), us);
    }
}

void perf_norm_ew_conv(const test_ops::Device& dev) {
    vulkan::Context& ctx = *dev.ctx;
    const std::size_t most = std::size_t{128} * kF;
    const vulkan::Buffer A = zeros(ctx, most), B = zeros(ctx, most), C = zeros(ctx, most), W = zeros(ctx, kD * 4),
                         St = zeros(ctx, kD * 3), Wc = zeros(ctx, 128);
    // rmsnorm: the decode row, one row's q heads, a prefill chunk.
    for (std::uint32_t rows : {1u, 128u}) {
        const vulkan::NormPush p{rows, kD, 0, kD, 0, kD, 0, 1e-6f, 0.0f};
        const double us = us_per_dispatch(ctx, 50, [&](vulkan::Frame& f) { dev.ops->rmsnorm(f, p, A, W, B); });
        perf_line("rmsnorm " + rows_of(rows, kD), 4.0 * (2.0 * rows * kD + kD), us);
    }
    {
        const vulkan::NormPush p{kH, kHd, 0, kHd, 0, kHd, 0, 1e-6f, 0.0f};
        const double us = us_per_dispatch(ctx, 50, [&](vulkan::Frame& f) { dev.ops->rmsnorm(f, p, A, W, A); });
        perf_line("rmsnorm 32 heads of 128, in place", 4.0 * (2.0 * kH * kHd + kHd), us);
    }
    // ew: the residual add, SwiGLU over the MLP row, the dense scale; the MoE join.
    struct E {
        const char* what;
        vulkan::EwOp op;
        std::uint32_t n;
        int floats;  // read + written per element
    };
    const E ews[] = {{"ew add 4096", vulkan::EwOp::Add, kD, 3},
                     {"ew swiglu 14336", vulkan::EwOp::Swiglu, kF, 3},
                     {"ew scale 4096", vulkan::EwOp::Scale, kD, 2},
                     {"ew swiglu 128 rows of 14336", vulkan::EwOp::Swiglu, 128 * kF, 3}};
    for (const E& e : ews) {
        const double us = us_per_dispatch(ctx, 50, [&](vulkan::Frame& f) { dev.ops->ew(f, e.op, A, B, e.n, 0.5f); });
        perf_line(e.what, 4.0 * e.n * e.floats, us);
    }
    for (std::uint32_t rows : {1u, 128u}) {
        const std::uint32_t n = rows * kD;
        const double us =
            us_per_dispatch(ctx, 50, [&](vulkan::Frame& f) { dev.ops->combine(f, A, B, C, Wc, n, kD, 1); });
        perf_line("ew combine " + rows_of(rows, kD) + ", 1 shared", 4.0 * n * 4, us);
    }
    // sconv (kernel 4): the attention or MLP conv over a row, the K conv, a prefill chunk.
    for (auto [rows, channels] : {std::pair{1u, kD}, std::pair{1u, kKV * kHd}, std::pair{128u, kD}}) {
        const vulkan::ConvPush p{rows, channels, 4, 0, 0};
        const double us = us_per_dispatch(ctx, 50, [&](vulkan::Frame& f) { dev.ops->sconv(f, p, A, W, St); });
        perf_line("sconv " + rows_of(rows, channels) + ", kernel 4",
                  4.0 * channels * (2.0 * rows + 4 + 2 * 3), us);
    }
}

void perf_attention(const test_ops::Device& dev) {
    vulkan::Context& ctx = *dev.ctx;
    const std::uint32_t cap = 32768, most = 128;
    const vulkan::Buffer Q = zeros(ctx, std::size_t{most} * kH * kHd), Kf = zeros(ctx, std::size_t{most} * kKV * kHd),
                         Vf = zeros(ctx, std::size_t{most} * kKV * kHd), Km = zeros(ctx, std::size_t{cap} * kKV * kHd),
                         Vm = zeros(ctx, std::size_t{cap} * kKV * kHd), Rr = zeros(ctx, std::size_t{most} * kH * kDrel),
                         Bank = zeros(ctx, std::size_t{kDrel} * 4096), Out = zeros(ctx, std::size_t{most} * kH * kHd),
                         Tau = zeros(ctx, most), Hp = zeros(ctx, std::size_t{most} * kH * (kHd + 2)),
                         // the rule's partials: up to 1024 rows × heads' worth, one chunk each past that
                         Part = zeros(ctx, std::max(vulkan::Ops::attn_part_floats_max(kHd),
                                                    std::size_t{most} * kH * (kHd + 2)));
    struct A {
        const char* what;
        std::uint32_t rows, pos0, window;
    };
    const A shapes[] = {{"relattn decode at 320, global", 1, 319, 0},
                        {"relattn decode at 1024, global", 1, 1023, 0},
                        {"relattn decode at 8192, global", 1, 8191, 0},
                        {"relattn decode at 32768, global", 1, cap - 1, 0},
                        {"relattn decode at 32768, sliding 4096", 1, cap - 1, 4096},
                        {"relattn 4 rows at 8192, global", 4, 8188, 0},
                        {"relattn prefill of 128 rows at 4096, global", most, 4096 - most, 0}};
    // Each shape with the one-workgroup kernel, then with the split the rule picks (where
    // it picks one; the µs of a split are its two dispatches and the barrier between).
    for (const A& a : shapes) {
        const std::uint32_t mrows = a.window > 0 ? a.window : cap, ext = a.window > 0 ? a.window : kExt;
        const vulkan::AttnPush p{0, a.rows, a.pos0, kH, kKV, kHd, kDrel, ext, a.window, mrows, 0, 1.0f / kHd};
        const vulkan::AttnBuffers b{&Q, &Kf, &Vf, &Km, &Vm, &Rr, &Bank, &Out, {&Tau}, &Hp, {&Part}};
        const double keys = a.window > 0 ? std::min(a.window, a.pos0 + a.rows) : a.pos0 + a.rows;
        const double bytes = 4.0 * (2.0 * keys * kKV * kHd + 2.0 * a.rows * kH * kHd);
        const double us =
            us_per_dispatch(ctx, 10, [&](vulkan::Frame& f) { dev.ops->relattn(f, p, b, vulkan::AttnSplit{}); });
        perf_line(std::string(a.what) + ", plain", bytes, us);
        const vulkan::AttnSplit s = vulkan::Ops::attn_split(p);
        if (s.chunks == 0) continue;
        const double us_split = us_per_dispatch(ctx, 10, [&](vulkan::Frame& f) { dev.ops->relattn(f, p, b, s); });
        perf_line(std::string(a.what) + ", split " + std::to_string(s.chunks) + " x " + std::to_string(s.chunk),
                  bytes, us_split);
    }
}

// The routed experts at decode: 8 pairs (top-8 of one row), each its own expert of width
// 2048 over hidden 4096 (gate/up) and back (down), bf16 against int8 and int4 (#14 item 3),
// and the activation quantization the integer ones need first.
void perf_moe(const test_ops::Device& dev) {
    vulkan::Context& ctx = *dev.ctx;
    const std::uint32_t P = 8, W = 2048;
    std::vector<std::uint32_t> ids(P);
    for (std::uint32_t q = 0; q < P; ++q) ids[q] = q;
    const vulkan::Buffer Route = test_ops::input(ctx, ids), Slots = test_ops::input(ctx, ids);
    const vulkan::Buffer X = zeros(ctx, std::size_t{P} * kD), Y = zeros(ctx, std::size_t{P} * kD),
                         Xq = zeros(ctx, std::size_t{P} * kD / 4), Xs = zeros(ctx, std::size_t{P} * kD / 32);
    for (auto [O, I, what] : {std::tuple{W, kD, "gate 2048x4096"}, std::tuple{kD, W, "down 4096x2048"}}) {
        const std::size_t elems = std::size_t{O} * I;
        if (dev.ops->int_experts()) {
            const vulkan::QactPush qp{P, I, I / 32, 0, I};
            const double us = us_per_dispatch(ctx, 50, [&](vulkan::Frame& f) { dev.ops->qact(f, qp, X, Xq, Xs); });
            perf_line(std::string("qact 8 rows of ") + std::to_string(I), 4.0 * P * I + P * I + 4.0 * P * I / 32, us);
        }
        {
            const vulkan::Buffer Wt = zeros(ctx, elems / 2 * P);
            const vulkan::MoeGemvPush p{O, I, P, 1, 0, P};
            const double us = us_per_dispatch(
                ctx, 20, [&](vulkan::Frame& f) { dev.ops->moe_gemv(f, true, p, Wt, X, Y, {&Route}, Slots); });
            perf_line(std::string("moe_gemv bf16 ") + what + ", 8 pairs", 2.0 * elems * P, us);
        }
        if (!dev.ops->int_experts()) continue;
        for (bool int4 : {false, true}) {
            const std::uint32_t blocks = I / 32, groups = int4 ? blocks : 1;
            const std::size_t slot_bytes = (int4 ? elems / 2 : elems) + std::size_t{O} * groups * 4;
            const vulkan::Buffer Wt = zeros(ctx, slot_bytes / 4 * P);
            const vulkan::MoeIntPush p{O, P, 1, 0, P, blocks, groups, int4 ? 1u : blocks,
                                       static_cast<std::uint32_t>(slot_bytes / 4)};
            const double us = us_per_dispatch(ctx, 20, [&](vulkan::Frame& f) {
                dev.ops->moe_gemv_int(f, int4, p, Wt, Xq, Xs, Y, {&Route}, Slots);
            });
            perf_line(std::string("moe_gemv_int ") + (int4 ? "int4 " : "int8 ") + what + ", 8 pairs",
                      static_cast<double>(slot_bytes) * P, us);
        }
    }
}

void perf_copy(const test_ops::Device& dev) {
    vulkan::Context& ctx = *dev.ctx;
    const std::size_t range = ctx.info().max_storage_range & ~std::size_t{15};
    const std::size_t bytes = std::min<std::size_t>(std::size_t{256} << 20, range);
    const vulkan::Buffer Src = zeros(ctx, bytes / 4), Dst = zeros(ctx, bytes / 4);
    vulkan::Kernel copy(ctx, "copy", 2, 4);
    const std::uint32_t count = static_cast<std::uint32_t>(bytes / 16);
    const vulkan::Binding b[] = {{&Src}, {&Dst}};
    const double us = us_per_dispatch(ctx, 5, [&](vulkan::Frame& f) { f.dispatch(copy, b, &count, 65535); });
    perf_line("copy.comp " + std::to_string(bytes >> 20) + " MiB", 2.0 * bytes, us);
    const double us2 = us_per_dispatch(ctx, 5, [&](vulkan::Frame& f) { f.copy(Src, 0, Dst, 0, bytes); });
    perf_line("Frame::copy " + std::to_string(bytes >> 20) + " MiB", 2.0 * bytes, us2);
}

}  // namespace

TEST_CASE("backend-ops perf: µs per dispatch and GB/s at an 8B-class model's sizes" * doctest::skip(!perf_wanted())) {
    auto* dev = test_ops::device();
    if (!dev) return;
    const vulkan::DeviceInfo& d = dev->ctx->info();
    std::printf("[backend-ops perf] %s (%s), subgroup %u\n", d.name.c_str(), d.type_name(), d.subgroup_size);
    perf_gemv(*dev);
    perf_norm_ew_conv(*dev);
    perf_attention(*dev);
    perf_moe(*dev);
    perf_copy(*dev);
}
