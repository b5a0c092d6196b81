#include "engine/vulkan/chain.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/forward/attention.h"
#include "engine/forward/attention_math.h"
#include "engine/forward/host_experts.h"
#include "engine/model/tensor.h"

namespace inkling::vulkan {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::uint32_t u32(std::int64_t v) { return static_cast<std::uint32_t>(v); }

std::unique_ptr<Buffer> floats_buffer(Context& ctx, const std::vector<float>& v) {
    auto b = std::make_unique<Buffer>(ctx, std::max<std::size_t>(4, v.size() * 4), Buffer::Kind::Device);
    b->write(v.data(), v.size() * 4);
    return b;
}

}  // namespace

// A weight matrix on the device, rows packed (no stride), in row chunks that each fit one
// storage-buffer binding.
struct Chain::DeviceMatrix {
    model::DType dtype = model::DType::F32;
    std::int64_t rows = 0, cols = 0;
    struct Chunk {
        std::unique_ptr<Buffer> buffer;
        std::int64_t first = 0, rows = 0;
    };
    std::vector<Chunk> chunks;
    std::uint64_t bytes = 0;

    DeviceMatrix(Context& ctx, const model::Matrix& m) : dtype(m.dtype), rows(m.rows), cols(m.cols) {
        const std::size_t row_bytes = model::dtype_bytes(m.dtype, m.cols);
        const std::int64_t per = std::max<std::int64_t>(
            1, static_cast<std::int64_t>(std::min<std::uint64_t>(ctx.info().max_storage_range, 1ull << 30) / row_bytes));
        std::vector<std::byte> staging;
        for (std::int64_t r0 = 0; r0 < rows; r0 += per) {
            const std::int64_t n = std::min(per, rows - r0);
            staging.resize(static_cast<std::size_t>(n) * row_bytes);
            for (std::int64_t r = 0; r < n; ++r) std::memcpy(staging.data() + r * row_bytes, m.row(r0 + r), row_bytes);
            Chunk c{std::make_unique<Buffer>(ctx, staging.size(), Buffer::Kind::Device), r0, n};
            c.buffer->write(staging.data(), staging.size());
            bytes += staging.size();
            chunks.push_back(std::move(c));
        }
    }
};

struct Chain::LayerBuffers {
    std::unique_ptr<Buffer> attn_norm, mlp_norm, q_norm, k_norm, k_conv, v_conv, attn_conv, mlp_conv, bank;
    std::unique_ptr<DeviceMatrix> wq, wk, wv, wr, wo, router, gate, up, down;
    std::vector<std::unique_ptr<DeviceMatrix>> sg, su, sd;  // shared experts
    float dense_scale = 1.0f;
};

struct Chain::Mirror {
    std::uint64_t token = 0;
    std::vector<std::int64_t> rows;             // K/V rows per device layer
    std::vector<std::unique_ptr<Buffer>> k, v;  // per device layer
    // The conv states (k, v, attention, MLP) of every device layer packed in one device
    // buffer — the shaders' reads and writes stay in device memory, not across the bus —
    // copied once a step into the host-visible twin the host reads them from.
    std::unique_ptr<Buffer> conv, conv_host;
    std::vector<std::array<std::uint32_t, 4>> conv_at;  // first float of each state
};

namespace {

// Why the chain can't take a layer's matrix, or "" when it can.
std::string matrix_problem(const std::string& what, const model::Matrix& m) {
    if (m.dtype != model::DType::F32 && m.dtype != model::DType::BF16)
        return what + " is " + model::dtype_name(m.dtype) + " (the shaders read F32 and BF16)";
    if (m.dtype == model::DType::BF16 && m.cols % 2 != 0) return what + " has an odd width in BF16";
    return "";
}

// The step size the expert tier leaves room for (rows of a prompt chunk).
constexpr std::int64_t kPlannedStepRows = 512;

std::uint64_t layer_bytes(const model::LayerWeights& L) {
    std::uint64_t b = L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wr.bytes() + L.wo.bytes();
    if (L.router.data) b += L.router.bytes();
    if (L.dense.gate.data) b += L.dense.gate.bytes() + L.dense.up.bytes() + L.dense.down.bytes();
    for (const auto& s : L.shared) b += s.gate.bytes() + s.up.bytes() + s.down.bytes();
    return b;
}

}  // namespace

Chain::Chain(const model::Model& model, const ChainOptions& o) : model_(model), c_(model.config), options_(o) {
    const auto& w = model.weights;
    // Geometry the shaders take.
    for (int i = 0; i < c_.layers; ++i) {
        if (c_.layer_head_dim(i) > 256) throw Declined("head dim " + std::to_string(c_.layer_head_dim(i)) + " > 256");
    }
    if (c_.d_rel > 64) throw Declined("relative-bias rank " + std::to_string(c_.d_rel) + " > 64");
    if (c_.conv_kernel > 9) throw Declined("short conv of " + std::to_string(c_.conv_kernel) + " taps > 9");
    auto check = [](const std::string& problem) {
        if (!problem.empty()) throw Declined(problem);
    };
    check(matrix_problem("lm_head", w.lm_head));
    for (int i = 0; i < c_.layers; ++i) {
        const auto& L = w.layers[i];
        const std::string at = "layer " + std::to_string(i) + " ";
        for (auto [n, m] : {std::pair{"q_proj", &L.wq}, {"k_proj", &L.wk}, {"v_proj", &L.wv}, {"r_proj", &L.wr},
                            {"o_proj", &L.wo}})
            check(matrix_problem(at + n, *m));
        if (c_.kinds[i].sparse) {
            check(matrix_problem(at + "router", L.router));
            for (const auto& s : L.shared)
                for (const model::Matrix* m : {&s.gate, &s.up, &s.down}) check(matrix_problem(at + "shared expert", *m));
        } else {
            for (const model::Matrix* m : {&L.dense.gate, &L.dense.up, &L.dense.down})
                check(matrix_problem(at + "dense MLP", *m));
        }
    }

    ctx_ = Context::open(o.device, o.budget);
    ops_ = std::make_unique<Ops>(*ctx_);
    ops_->set_gemm_rows(o.gemm_rows);

    // How many layers fit: the budget less lm_head, the final norm and a scratch reserve
    // (with a forced count for tests).
    const std::uint64_t budget = ctx_->budget();
    const std::uint64_t reserve = std::min<std::uint64_t>(64ull << 20, budget / 4);
    const std::uint64_t left = budget > reserve ? budget - reserve : 0;
    // The first layers whose weights, after `first` bytes, fit what is left.
    auto layers_fitting = [&](std::uint64_t first) {
        int n = 0;
        for (std::uint64_t need = first; n < c_.layers; ++n) {
            need += layer_bytes(w.layers[n]);
            if (need > left) break;
        }
        return n;
    };
    if (o.layers >= 0) {
        n_layers_ = std::min(o.layers, c_.layers);
    } else {
        n_layers_ = layers_fitting(w.lm_head.bytes());
        // lm_head stays on the host with a partial chain: the layers alone count, and at
        // least the last layer stays too (a chain of every layer computes the logits, so
        // it would need lm_head after all: Inkling-Small's layers fit lavapipe's 2 GiB,
        // its 1.5 GiB lm_head beside them does not).
        if (n_layers_ < c_.layers) n_layers_ = std::min(layers_fitting(0), c_.layers - 1);
    }
    if (n_layers_ == 0) throw Declined("not one layer fits the device budget of " + std::to_string(budget >> 20) + " MiB");

    for (int i = 0; i < n_layers_; ++i) {
        const auto& L = w.layers[i];
        auto B = std::make_unique<LayerBuffers>();
        B->attn_norm = floats_buffer(*ctx_, L.attn_norm);
        B->mlp_norm = floats_buffer(*ctx_, L.mlp_norm);
        B->q_norm = floats_buffer(*ctx_, L.q_norm);
        B->k_norm = floats_buffer(*ctx_, L.k_norm);
        B->k_conv = floats_buffer(*ctx_, L.k_conv);
        B->v_conv = floats_buffer(*ctx_, L.v_conv);
        B->attn_conv = floats_buffer(*ctx_, L.attn_conv);
        B->mlp_conv = floats_buffer(*ctx_, L.mlp_conv);
        B->bank = floats_buffer(*ctx_, L.rel_bank);
        B->wq = std::make_unique<DeviceMatrix>(*ctx_, L.wq);
        B->wk = std::make_unique<DeviceMatrix>(*ctx_, L.wk);
        B->wv = std::make_unique<DeviceMatrix>(*ctx_, L.wv);
        B->wr = std::make_unique<DeviceMatrix>(*ctx_, L.wr);
        B->wo = std::make_unique<DeviceMatrix>(*ctx_, L.wo);
        if (c_.kinds[i].sparse) {
            B->router = std::make_unique<DeviceMatrix>(*ctx_, L.router);
            for (const auto& s : L.shared) {
                B->sg.push_back(std::make_unique<DeviceMatrix>(*ctx_, s.gate));
                B->su.push_back(std::make_unique<DeviceMatrix>(*ctx_, s.up));
                B->sd.push_back(std::make_unique<DeviceMatrix>(*ctx_, s.down));
            }
        } else {
            B->gate = std::make_unique<DeviceMatrix>(*ctx_, L.dense.gate);
            B->up = std::make_unique<DeviceMatrix>(*ctx_, L.dense.up);
            B->down = std::make_unique<DeviceMatrix>(*ctx_, L.dense.down);
            B->dense_scale = L.dense_scale;
        }
        layer_.push_back(std::move(B));
        if (o.on_layer) o.on_layer(static_cast<std::uint64_t>(i) + 1, static_cast<std::uint64_t>(n_layers_));
    }
    if (n_layers_ == c_.layers) {
        lm_head_ = std::make_unique<DeviceMatrix>(*ctx_, w.lm_head);
        final_norm_ = floats_buffer(*ctx_, w.final_norm);
    }
    if (o.expert_layers != 0) {
        // The experts may take what is left once room for the sessions' K/V mirrors and
        // the step scratch is kept: a quarter of it, or the scratch of a 512-row prompt
        // chunk (the largest step run and bench make; serve's are 256) and the reserve if
        // that is more — else every prompt step would run on the CPU (Inkling-Small's
        // width: ~380 MiB) — but never more than half: a budget too tight for both still
        // gets a tier, and its long prompt steps run on the CPU.
        const std::uint64_t used = ctx_->used();
        const std::uint64_t free = budget > used ? budget - used : 0;
        const std::uint64_t chunk_room = reserve + scratch(kPlannedStepRows, Scratch::count, true);
        const std::uint64_t keep = std::max(std::min(chunk_room, free / 2), free / 4);
        if (free > keep) {
            TierOptions to;
            to.layers = o.expert_layers;
            to.slots = o.expert_slots;
            to.inline_uploads = o.inline_uploads;
            to.fault_upload_at = o.fault_upload_at;
            to.stream_rows = o.stream_rows;
            to.stream_slots = o.stream_slots;
            tier_ = std::make_unique<ExpertTier>(*ctx_, *ops_, model, n_layers_, free - keep, to, o.history);
            if (tier_->layers_with_bank() == 0) tier_.reset();
        }
    }
    for (auto& f : a1_) {
        f = std::make_unique<Frame>(*ctx_);
        if (o.profile) f->set_profile(&profile_);
    }
    f2_ = std::make_unique<Frame>(*ctx_);
    if (o.profile) f2_->set_profile(&profile_);
    for (auto& f : stream_frames_) {
        f = std::make_unique<Frame>(*ctx_);
        if (o.profile) f->set_profile(&profile_);
    }
    std::uint32_t hd_max = 1;
    for (int i = 0; i < c_.layers; ++i) hd_max = std::max(hd_max, u32(c_.layer_head_dim(i)));
    part_stride_ = (Ops::attn_part_floats_max(hd_max) * 4 + 255) / 256 * 256;
}


Chain::~Chain() {
    try {
        if (f2_) f2_->wait();
        for (auto& f : stream_frames_)
            if (f) f->wait();
        for (auto& f : a1_)
            if (f) f->wait();
    } catch (...) {
    }
}

bool Chain::full() const { return n_layers_ == c_.layers; }

void Chain::forget_sessions() { mirrors_.clear(); }

void Chain::gemv(Frame& f, const DeviceMatrix& m, const Buffer& x, std::uint32_t x_off, std::uint32_t rows,
                 const Buffer& y, std::uint32_t y_off, std::uint32_t y_stride, const Buffer* up) {
    for (const auto& c : m.chunks)
        ops_->gemv(f, m.dtype == model::DType::BF16, *c.buffer, x, y,
                   {u32(c.rows), u32(m.cols), rows, u32(m.cols), 0, x_off, u32(m.cols), y_off + u32(c.first), y_stride},
                   up);
}

void Chain::rmsnorm(Frame& f, const Buffer& x, std::uint32_t x_off, std::uint32_t segments, std::uint32_t n,
                    const Buffer& w, const Buffer& out, std::uint32_t out_off, float scale) {
    ops_->rmsnorm(f, {segments, n, x_off, n, out_off, n, scale != 0.0f ? 1u : 0u, static_cast<float>(c_.eps), scale},
                  x, w, out);
}

void Chain::sconv(Frame& f, const Buffer& x, std::uint32_t x_off, std::uint32_t rows, std::uint32_t channels,
                  const Buffer& w, const Mirror& m, int layer, int which) {
    ops_->sconv(f, {rows, channels, u32(c_.conv_kernel), x_off, m.conv_at[layer][which]}, x, w, *m.conv);
}

void Chain::ensure_scratch(std::int64_t R) {
    if (R <= scratch_rows_) return;
    // The old scratch goes first (no frame is in flight between steps), and a size the
    // budget refuses leaves none behind: buffers kept from a failed prompt-sized attempt
    // would fill the budget, and every later step, decode rows too, would fail at its first
    // allocation.
    scratch(0, Scratch::release, tier_ != nullptr);
    scratch_rows_ = 0;
    const std::int64_t n = std::max<std::int64_t>(R, 16);
    try {
        scratch(n, Scratch::allocate, tier_ != nullptr);
    } catch (const OutOfBudget&) {
        scratch(0, Scratch::release, tier_ != nullptr);
        throw;
    }
    scratch_rows_ = n;
}

std::uint64_t Chain::scratch(std::int64_t n, Scratch mode, bool with_tier) {
    std::int64_t qmax = 0, kvmax = 0, rmax = 0, imax = c_.moe_inter;
    for (int i = 0; i < c_.layers; ++i) {
        qmax = std::max<std::int64_t>(qmax, std::int64_t{c_.layer_heads(i)} * c_.layer_head_dim(i));
        kvmax = std::max<std::int64_t>(kvmax, std::int64_t{c_.layer_kv_heads(i)} * c_.layer_head_dim(i));
        rmax = std::max<std::int64_t>(rmax, std::int64_t{c_.layer_heads(i)} * c_.d_rel);
        if (!c_.kinds[i].sparse) imax = std::max<std::int64_t>(imax, c_.dense_inter);
    }
    const std::int64_t D = c_.hidden, NS = std::max(1, c_.shared_experts), E = c_.experts + c_.shared_experts;
    // Slices per layer (a frame may span layers): 256 bytes apart at least, the largest
    // storage-buffer offset alignment Vulkan allows.
    auto aligned = [](std::size_t b) { return (b + 255) / 256 * 256; };
    std::uint64_t total = 0;
    auto buffer = [&](Buffer& b, std::size_t bytes, Buffer::Kind kind) {
        total += aligned(bytes);
        if (mode == Scratch::release) b = Buffer();
        if (mode == Scratch::allocate) b = Buffer(*ctx_, bytes, kind);
    };
    auto dev = [&](Buffer& b, std::int64_t floats) { buffer(b, static_cast<std::size_t>(floats) * 4, Buffer::Kind::Device); };
    auto host = [&](Buffer& b, std::int64_t floats) { buffer(b, static_cast<std::size_t>(floats) * 4, Buffer::Kind::Host); };
    dev(x_, n * D);
    dev(h_, n * D);
    dev(a_, n * D);
    dev(q_, n * qmax);
    dev(kf_, n * kvmax);
    dev(vf_, n * kvmax);
    dev(r_, n * std::max<std::int64_t>(rmax, 1));
    dev(ctx_rows_, n * qmax);
    const std::size_t tau_stride = aligned(static_cast<std::size_t>(n) * 4);
    // tau: written by the host each layer, read by every attention workgroup — in device
    // memory when the host can map it (ReBAR, lavapipe), else host-visible.
    buffer(tau_, tau_stride * static_cast<std::size_t>(c_.layers), Buffer::Kind::Device);
    if (mode == Scratch::allocate && !tau_.mapped())
        tau_ = Buffer(*ctx_, tau_stride * static_cast<std::size_t>(c_.layers), Buffer::Kind::Host);
    dev(g_, n * imax);
    dev(u_, n * imax);
    dev(shared_out_, NS * n * D);
    dev(sg_, NS * n * std::max<std::int64_t>(c_.moe_inter, 1));
    dev(su_, NS * n * std::max<std::int64_t>(c_.moe_inter, 1));
    host(routed_, n * D);
    host(shared_w_, n * NS);
    host(logits_, n * std::max<std::int64_t>(E, 1));
    host(h_down_, n * D);
    const std::int64_t kv_stride = 2 * n * kvmax;
    host(kv_down_, kv_stride * c_.layers);
    host(out_, n * D);
    host(q_down_, n * qmax);
    host(r_down_, n * std::max<std::int64_t>(rmax, 1));
    std::int64_t hp = 0;
    for (int i = 0; i < c_.layers; ++i)
        hp = std::max<std::int64_t>(hp, std::int64_t{c_.layer_heads(i)} * (c_.layer_head_dim(i) + 2));
    host(host_part_, n * hp);
    if (with_tier) {
        const std::int64_t P = n * c_.top_k;
        host(y_host_, P * D);
        dev(route_logits_, n * std::max<std::int64_t>(E, 1));
        dev(pg_, P * c_.moe_inter);
        dev(pu_, P * c_.moe_inter);
        dev(py_, P * D);
        const std::size_t route_stride = aligned(static_cast<std::size_t>(P) * 4);
        buffer(route_e_, route_stride * static_cast<std::size_t>(c_.layers), Buffer::Kind::Host);
        buffer(route_e_dev_, route_stride * static_cast<std::size_t>(c_.layers), Buffer::Kind::Device);
        if (mode == Scratch::allocate) route_stride_ = route_stride;
        dev(route_w_, P);
        dev(shared_wd_, n * NS);
        // Integer experts: each pair's activations quantized, int8 values and a scale a
        // block (counted before the tier exists as if it had them).
        const std::size_t row = tier_ ? tier_->act_row_bytes() : static_cast<std::size_t>(D);
        if (row > 0 || mode == Scratch::release) {
            buffer(act_q_, static_cast<std::size_t>(P) * row, Buffer::Kind::Device);
            buffer(act_s_, static_cast<std::size_t>(P) * row / 32 * 4, Buffer::Kind::Device);
        }
    }
    if (mode == Scratch::allocate) {
        tau_stride_ = tau_stride;
        kv_stride_ = kv_stride;
    }
    return total;
}

std::unique_ptr<Chain::Mirror> Chain::make_mirror(const forward::SessionState& s, std::int64_t kv_window) {
    auto m = std::make_unique<Mirror>();
    for (int i = 0; i < n_layers_; ++i) {
        const auto& L = s.layers[i];
        std::int64_t rows = L.rows;
        if (kv_window > 0 && !c_.kinds[i].local && kv_window < rows) rows = kv_window;
        m->rows.push_back(rows);
        const std::size_t bytes = static_cast<std::size_t>(L.kv_heads * rows * L.head_dim) * 4;
        m->k.push_back(std::make_unique<Buffer>(*ctx_, bytes, Buffer::Kind::Device));
        m->v.push_back(std::make_unique<Buffer>(*ctx_, bytes, Buffer::Kind::Device));
    }
    std::uint32_t floats = 0;
    for (int i = 0; i < n_layers_; ++i) {
        std::array<std::uint32_t, 4> at{};
        for (int j = 0; j < 4; ++j) at[j] = floats, floats += u32(s.layers[i].conv[j].size());
        m->conv_at.push_back(at);
    }
    const std::size_t conv_bytes = std::max<std::size_t>(4, std::size_t{floats} * 4);
    m->conv = std::make_unique<Buffer>(*ctx_, conv_bytes, Buffer::Kind::Device);
    m->conv_host = std::make_unique<Buffer>(*ctx_, conv_bytes, Buffer::Kind::Host);
    return m;
}

void Chain::upload(Mirror& m, const forward::SessionState& s) {
    for (int i = 0; i < n_layers_; ++i) {
        const auto& L = s.layers[i];
        if (m.rows[i] == L.rows) {
            m.k[i]->write(L.k.data(), L.k.size() * 4);
            m.v[i]->write(L.v.data(), L.v.size() * 4);
        } else {
            // A split layer's ring: the last m.rows positions, position t at row t % rows.
            const std::int64_t R = m.rows[i], hd = L.head_dim;
            std::vector<float> k(static_cast<std::size_t>(L.kv_heads * R * hd), 0.0f), v(k.size(), 0.0f);
            for (std::int64_t t = std::max<std::int64_t>(0, s.len - R); t < s.len; ++t)
                for (std::int64_t g = 0; g < L.kv_heads; ++g) {
                    std::copy_n(L.k.data() + (g * L.rows + t % L.rows) * hd, hd, k.data() + (g * R + t % R) * hd);
                    std::copy_n(L.v.data() + (g * L.rows + t % L.rows) * hd, hd, v.data() + (g * R + t % R) * hd);
                }
            m.k[i]->write(k.data(), k.size() * 4);
            m.v[i]->write(v.data(), v.size() * 4);
        }
    }
    auto* packed = static_cast<float*>(m.conv_host->data());
    for (int i = 0; i < n_layers_; ++i)
        for (int j = 0; j < 4; ++j) std::copy(s.layers[i].conv[j].begin(), s.layers[i].conv[j].end(), packed + m.conv_at[i][j]);
    m.conv->write(packed, m.conv_host->size());
}

Chain::Mirror& Chain::mirror(forward::SessionState* s) {
    auto it = mirrors_.find(s);
    if (it == mirrors_.end()) {
        std::unique_ptr<Mirror> made;
        try {
            made = make_mirror(*s, options_.kv_window);
        } catch (const OutOfBudget&) {
            // Make room: drop the mirrors of sessions outside this step (they re-upload when
            // they come back); then split the global layers, keeping fewer of their rows.
            for (auto e = mirrors_.begin(); e != mirrors_.end();) {
                const bool in_step = std::any_of(spans_.begin(), spans_.end(),
                                                 [&](const Span& sp) { return sp.state == e->first; });
                e = in_step ? std::next(e) : mirrors_.erase(e);
            }
            std::int64_t window = options_.kv_window > 0 ? options_.kv_window : s->capacity;
            for (; !made; window /= 2) {
                try {
                    made = make_mirror(*s, window);
                } catch (const OutOfBudget&) {
                    if (window <= 64) throw;
                }
            }
        }
        for (int i = 0; i < n_layers_; ++i) stats_.split_layers += made->rows[i] < s->layers[i].rows;
        it = mirrors_.emplace(s, std::move(made)).first;
    }
    Mirror& m = *it->second;
    if (m.token == 0 || s->device_token != m.token) {
        // The host wrote this state alone since the chain last ran it: upload all of it.
        upload(m, *s);
        m.token = next_token_++;
        s->device_token = m.token;
        ++stats_.uploads;
    }
    return m;
}

void Chain::begin(std::span<const Span> spans, std::int64_t R, float* x) {
    step_t0_ = Clock::now();
    step_wait_s_ = 0;
    if (tier_) tier_->between_steps();  // no frame in flight: the slots may change
    ensure_scratch(R);
    spans_.assign(spans.begin(), spans.end());
    R_ = R;
    pending_moe_ = -1;
    pending_tier_ = false;
    add_pending_ = false;
    conv_pending_ = {};
    a1_early_ = 0;
    for (const Span& sp : spans_) mirror(sp.state);
    if (const std::size_t need = part_stride_ * spans_.size(); attn_part_.size() < need && need != part_refused_) {
        // The split attention's scratch; a budget too tight for it keeps every span on the
        // one-workgroup kernel (the same results, slower decode).
        attn_part_ = Buffer();
        try {
            attn_part_ = Buffer(*ctx_, need, Buffer::Kind::Device);
        } catch (const OutOfBudget&) {
            part_refused_ = need;  // not asked again for as many spans
        }
    }
    x_.write(x, static_cast<std::size_t>(R * c_.hidden) * 4);
}

void Chain::join_moe(Frame& f, int i) {
    const std::int64_t D = c_.hidden;
    if (pending_tier_) {
        // A tier layer: the host's pairs join the device's, then a = Σ_k w·y + shared.
        if (!host_pair_copies_.empty()) {
            f.copy_regions(y_host_, py_, host_pair_copies_);
            f.barrier();
        }
        ops_->moe_join(f, {u32(R_ * D), u32(D), u32(c_.top_k), u32(c_.shared_experts)}, a_, py_, route_w_,
                       shared_out_, shared_wd_);
    } else {
        // a = routed + Σ_j w_j·shared_j (the CPU's order), then that layer's MLP conv, x += a.
        ops_->combine(f, a_, routed_, shared_out_, shared_w_, u32(R_ * D), u32(D), u32(c_.shared_experts));
    }
    pending_tier_ = false;
    f.barrier();
    mlp_conv_add(f, i);
}

void Chain::mlp_conv_add(Frame& f, int i, bool join) { conv_add(f, i, 3, *layer_[i]->mlp_conv, join); }

void Chain::conv_add(Frame& f, int layer, int which, const Buffer& w, bool join) {
    add_pending_ = true;  // x += a joins the next norm (norm_x) or the step's end (apply_add)
    // Spans of one row each (decode): the conv (and the join) wait too, for norm_x's conv_add_norm.
    if (std::all_of(spans_.begin(), spans_.end(), [](const Span& sp) { return sp.rows == 1; })) {
        conv_pending_ = {layer, which, &w, join};
        return;
    }
    if (join) record_join(f);
    record_conv(f, layer, which, w);
}

void Chain::record_join(Frame& f) {
    const std::int64_t D = c_.hidden;
    ops_->moe_join(f, {u32(R_ * D), u32(D), u32(c_.top_k), u32(c_.shared_experts)}, a_, py_, route_w_, shared_out_,
                   shared_wd_);
    f.barrier();
}

void Chain::record_conv(Frame& f, int layer, int which, const Buffer& w) {
    const std::int64_t D = c_.hidden;
    for (const Span& sp : spans_) sconv(f, a_, u32(sp.first * D), u32(sp.rows), u32(D), w, mirror(sp.state), layer, which);
    f.barrier();
}

void Chain::norm_x(Frame& f, const Buffer& weight) {
    const std::uint32_t D = u32(c_.hidden), R = u32(R_);
    if (conv_pending_.layer >= 0) {
        // Each decode row's conv, residual add and norm in one dispatch.
        const JoinInput join{&py_, &route_w_, &shared_out_, &shared_wd_, u32(c_.top_k), u32(c_.shared_experts), R * D};
        for (const Span& sp : spans_) {
            const Mirror& m = mirror(sp.state);
            const ConvAddNormPush p{u32(sp.first), D, u32(c_.conv_kernel),
                                    m.conv_at[conv_pending_.layer][conv_pending_.which], static_cast<float>(c_.eps)};
            ops_->conv_add_norm(f, p, x_, a_, *conv_pending_.weights, *m.conv, weight, h_,
                                conv_pending_.join ? &join : nullptr);
        }
        conv_pending_ = {};
    } else {
        const NormPush p{R, D, 0, D, 0, D, 0, static_cast<float>(c_.eps), 0.0f};
        if (add_pending_) ops_->add_rmsnorm(f, p, x_, a_, weight, h_);
        else ops_->rmsnorm(f, p, x_, weight, h_);
    }
    add_pending_ = false;
    f.barrier();
}

void Chain::apply_add(Frame& f) {
    if (conv_pending_.layer >= 0) {
        if (conv_pending_.join) record_join(f);
        record_conv(f, conv_pending_.layer, conv_pending_.which, *conv_pending_.weights);
        conv_pending_ = {};
    }
    if (!add_pending_) return;
    ops_->ew(f, EwOp::Add, x_, a_, u32(R_ * c_.hidden));
    f.barrier();
    add_pending_ = false;
}

void Chain::attention(int i) {
    const LayerBuffers& B = *layer_[i];
    const std::int64_t D = c_.hidden, R = R_;
    const std::int64_t H = c_.layer_heads(i), KV = c_.layer_kv_heads(i), hd = c_.layer_head_dim(i);
    const std::int64_t kvd = KV * hd;
    const bool local = c_.kinds[i].local;
    // tau per row, in double as the CPU computes it, in this layer's slice.
    const std::size_t tau_at = tau_stride_ * static_cast<std::size_t>(i);
    {
        auto* tau = reinterpret_cast<float*>(static_cast<std::byte*>(tau_.data()) + tau_at);
        for (const Span& sp : spans_)
            for (std::int64_t s = 0; s < sp.rows; ++s) tau[sp.first + s] = forward::attention_tau(c_, i, sp.pos0 + s);
    }
    Frame& f = open_a1();
    if (pending_moe_ >= 0) join_moe(f, pending_moe_), pending_moe_ = -1;

    norm_x(f, *B.attn_norm);  // the last layer's x += a fused in
    gemv(f, *B.wq, h_, 0, u32(R), q_, 0, u32(H * hd));
    gemv(f, *B.wk, h_, 0, u32(R), kf_, 0, u32(kvd));
    gemv(f, *B.wv, h_, 0, u32(R), vf_, 0, u32(kvd));
    gemv(f, *B.wr, h_, 0, u32(R), r_, 0, u32(H * c_.d_rel));
    f.barrier();
    // The K conv with the k-norm (conv_norm.comp), the V conv and the q-norm: one stage.
    for (const Span& sp : spans_) {
        Mirror& m = mirror(sp.state);
        ops_->conv_norm(f, {u32(sp.rows), u32(kvd), u32(c_.conv_kernel), u32(sp.first * kvd), m.conv_at[i][0], u32(hd),
                            static_cast<float>(c_.eps)},
                        kf_, *B.k_conv, *m.conv, *B.k_norm);
        sconv(f, vf_, u32(sp.first * kvd), u32(sp.rows), u32(kvd), *B.v_conv, m, i, 1);
    }
    rmsnorm(f, q_, 0, u32(R * H), u32(hd), *B.q_norm, q_, 0);
    f.barrier();
    // A split layer: the host attends the positions the device no longer holds, from
    // the canonical cache (the CPU's attention in its statistics mode), and the device's
    // online softmax starts from its statistics.
    std::vector<std::int64_t> lo(spans_.size(), 0);
    bool host_share = false;
    for (std::size_t b = 0; b < spans_.size(); ++b) {
        const Mirror& m = mirror(spans_[b].state);
        if (m.rows[i] < spans_[b].state->layers[i].rows) lo[b] = std::max<std::int64_t>(0, spans_[b].pos0 - m.rows[i]);
        host_share = host_share || lo[b] > 0;
    }
    if (host_share) {
        f.copy(q_, 0, q_down_, 0, static_cast<std::size_t>(R * H * hd) * 4);
        f.copy(r_, 0, r_down_, 0, static_cast<std::size_t>(R * H * c_.d_rel) * 4);
        run_frame(f);
        const forward::AttentionView view{c_,      i,       model_.weights.layers[i].rel_bank.data(),
                                          spans_,  static_cast<const float*>(q_down_.data()),
                                          nullptr, nullptr, static_cast<const float*>(r_down_.data())};
        for (std::size_t b = 0; b < spans_.size(); ++b)
            if (lo[b] > 0) forward::attend_stats(view, b, lo[b], host_pool_, static_cast<float*>(host_part_.data()));
        f.begin();
    }
    for (std::size_t b = 0; b < spans_.size(); ++b) {
        const Span& sp = spans_[b];
        Mirror& m = mirror(sp.state);
        const AttnPush p{u32(sp.first), u32(sp.rows), u32(sp.pos0), u32(H), u32(KV), u32(hd), u32(c_.d_rel),
                         u32(c_.layer_extent(i)), local ? u32(c_.window) : 0u, u32(m.rows[i]), u32(lo[b]),
                         1.0f / static_cast<float>(hd)};
        // Decode rows split their positions over many workgroups (Ops::attn_split), each
        // span into its own range of partials (the spans' calls have no barrier between them).
        const Binding part = attn_part_.size() >= part_stride_ * spans_.size()
                                 ? Binding{&attn_part_, part_stride_ * b, part_stride_}
                                 : Binding{nullptr};
        ops_->relattn(f, p, {&q_, &kf_, &vf_, m.k[i].get(), m.v[i].get(), &r_, B.bank.get(), &ctx_rows_,
                             {&tau_, tau_at, tau_stride_}, &host_part_, part});
    }
    // The step's K/V rows down to the host's copy (into the mirrors after the barrier,
    // once the attention has read them).
    const std::size_t kv_at = static_cast<std::size_t>(kv_stride_ * i);
    f.copy(kf_, 0, kv_down_, kv_at * 4, static_cast<std::size_t>(R * kvd) * 4);
    f.copy(vf_, 0, kv_down_, (kv_at + static_cast<std::size_t>(R * kvd)) * 4, static_cast<std::size_t>(R * kvd) * 4);
    f.barrier();  // o_proj reads the attention's output
    gemv(f, *B.wo, ctx_rows_, 0, u32(R), a_, 0, u32(D));
    // The step's K/V rows into each mirror's ring (rows a ring would overwrite within the
    // block skipped, as on the host), now that the attention has read the older ones.
    for (const Span& sp : spans_) {
        Mirror& m = mirror(sp.state);
        const KvStorePush kp{u32(sp.first), u32(sp.rows), u32(sp.pos0), u32(KV), u32(hd), u32(m.rows[i])};
        ops_->kvstore(f, kp, kf_, *m.k[i]);
        ops_->kvstore(f, kp, vf_, *m.v[i]);
    }
    f.barrier();
    conv_add(f, i, 2, *B.attn_conv);  // the attention conv and x += a ...
    norm_x(f, *B.mlp_norm);           // ... joined with the post-attention norm of x
}

void Chain::run_a1() { run_frame(a1()); }

Frame& Chain::open_a1() {
    // A frame goes on across layers until the host needs a result (router logits, a split
    // layer's queries, the end of the step), short of its descriptor sets. Past
    // submit_dispatches it is submitted without a wait and the next frame of the ring goes
    // on: the device starts on the first layers while the host records the rest. At most
    // ring − 1 such submits a step, so a step never waits for its own earlier frames (a
    // frame of the step before is done: that step's last wait came after it).
    Frame* f = &a1();
    if (f->recording() && f->dispatches() + 512 > Frame::max_dispatches) {
        run_a1();
    } else if (f->recording() && options_.submit_dispatches > 0 && f->dispatches() >= options_.submit_dispatches &&
               a1_early_ + 1 < a1_.size()) {
        submit_frame(*f);
        ++a1_early_;
        a1_at_ = (a1_at_ + 1) % a1_.size();
        f = &a1();
        if (f->running()) wait_frame(*f);  // the ring came round to a frame still running
    }
    if (!f->recording()) {
        f->begin();
        f->barrier();  // after the previous frames (A2's shared experts among them)
    }
    return *f;
}

void Chain::submit_frame(Frame& f) {
    stats_.dispatches += f.dispatches();
    stats_.barriers += f.barriers();
    f.submit();
    ++stats_.frames;
}

void Chain::run_frame(Frame& f) {
    submit_frame(f);
    wait_frame(f);
}

void Chain::wait_frame(Frame& f) {
    const auto t = Clock::now();
    f.wait();
    step_wait_s_ += since(t);
    ++stats_.waits;
}

void Chain::router(int i, float* h_host, float* logits_host) {
    const std::int64_t D = c_.hidden, R = R_, E = c_.experts + c_.shared_experts;
    Frame& f = a1();
    gemv(f, *layer_[i]->router, h_, 0, u32(R), logits_, 0, u32(E));
    f.copy(h_, 0, h_down_, 0, static_cast<std::size_t>(R * D) * 4);
    run_a1();
    std::memcpy(h_host, h_down_.data(), static_cast<std::size_t>(R * D) * 4);
    std::memcpy(logits_host, logits_.data(), static_cast<std::size_t>(R * E) * 4);
}

void Chain::dense_mlp(int i) {
    const LayerBuffers& B = *layer_[i];
    const std::int64_t D = c_.hidden, R = R_, I = c_.dense_inter;
    Frame& f = a1();
    gemv(f, *B.gate, h_, 0, u32(R), g_, 0, u32(I));
    gemv(f, *B.up, h_, 0, u32(R), u_, 0, u32(I));
    f.barrier();
    const bool apart = ops_->swiglu_apart(f, g_, u_, u32(R * I), R > 1);
    gemv(f, *B.down, g_, 0, u32(R), a_, 0, u32(D), apart ? nullptr : &u_);  // of silu(gate)·up
    f.barrier();
    if (B.dense_scale != 1.0f) {
        ops_->ew(f, EwOp::Scale, a_, a_, u32(R * D), B.dense_scale);
        f.barrier();
    }
    mlp_conv_add(f, i);  // the frame goes on into the next layer
}

bool Chain::moe_resident(int i) {
    if (!resident(i)) return false;
    const LayerBuffers& B = *layer_[i];
    const std::int64_t R = R_, K = c_.top_k, P = R * K, NS = c_.shared_experts;
    const std::int64_t E = c_.experts + NS;
    // The routes stay in device memory through the layer (the pairs' gemvs read them);
    // finish() copies them to route_e_ for the host's usage counts.
    const Binding route_e{&route_e_dev_, route_stride_ * static_cast<std::size_t>(i), route_stride_};
    Frame& f = a1();
    // Router logits and top-k on the device: pairs (row, k) in increasing expert id. The
    // shared experts go beside the routed ones stage by stage (they read h, as the router
    // does), their SwiGLU inside their down projection, beside the pairs' gate/up.
    const RoutePush rp{u32(R), u32(c_.experts), u32(NS), u32(K), tier_->route_scale(i)};
    const bool bf16 = B.router->dtype == model::DType::BF16;
    if (B.router->chunks.size() == 1 && Ops::router_fits(u32(c_.experts), u32(NS), u32(c_.hidden), bf16)) {
        // A small router: its logits and the top-k in one dispatch, beside the shared experts'
        // gate/up (the logits' bits are the router gemv's).
        ops_->moe_router_route(f, rp, bf16, *B.router->chunks[0].buffer, u32(c_.hidden), h_, tier_->bias(i), route_e,
                               route_w_, shared_wd_);
        shared_gate_up(f, i);
        f.barrier();
    } else {
        gemv(f, *B.router, h_, 0, u32(R), route_logits_, 0, u32(E));
        shared_gate_up(f, i);
        f.barrier();
        ops_->moe_route(f, rp, {&route_logits_}, tier_->bias(i), route_e, route_w_, shared_wd_);
        f.barrier();
    }
    shared_down(f, i);
    tier_->record_pairs(f, i, u32(P), u32(K), h_, route_e, pg_, pu_, py_, {&act_q_, &act_s_});
    f.barrier();
    mlp_conv_add(f, i, /*join=*/true);  // on decode the join goes into the next norm's dispatch too
    stats_.device_pairs += static_cast<std::uint64_t>(P);
    return true;
}

void Chain::shared_experts(Frame& f, int i) {
    shared_gate_up(f, i);
    f.barrier();
    shared_down(f, i);
    f.barrier();
}

// Every shared expert at once, each in its own slice: gate and up of h into sg_/su_ j,
// then down of silu(gate)·up (the SwiGLU inside the down projection) into shared_out_ j.
void Chain::shared_gate_up(Frame& f, int i) {
    const LayerBuffers& B = *layer_[i];
    const std::int64_t R = R_, I = c_.moe_inter;
    for (std::int64_t j = 0; j < c_.shared_experts; ++j) {
        gemv(f, *B.sg[j], h_, 0, u32(R), sg_, u32(j * R * I), u32(I));
        gemv(f, *B.su[j], h_, 0, u32(R), su_, u32(j * R * I), u32(I));
    }
}

void Chain::shared_down(Frame& f, int i) {
    const LayerBuffers& B = *layer_[i];
    const std::int64_t D = c_.hidden, R = R_, I = c_.moe_inter;
    const bool apart = ops_->swiglu_apart(f, sg_, su_, u32(c_.shared_experts * R * I), R > 1);
    for (std::int64_t j = 0; j < c_.shared_experts; ++j)
        gemv(f, *B.sd[j], sg_, u32(j * R * I), u32(R), shared_out_, u32(j * R * D), u32(D), apart ? nullptr : &su_);
}


void Chain::moe_tier(int i, const forward::Routing& routing, const float* h, forward::HostExperts& host) {
    const std::int64_t D = c_.hidden, R = R_, K = c_.top_k, P = R * K, NS = c_.shared_experts;
    // The pairs in the CPU's order: row by row, each row's experts in increasing id.
    std::vector<std::uint32_t> pair_e(static_cast<std::size_t>(P));
    std::vector<float> pair_w(static_cast<std::size_t>(P));
    std::vector<std::int64_t> filled(static_cast<std::size_t>(R), 0);
    std::vector<std::vector<std::int64_t>> pair_of(routing.by_expert.size());
    std::vector<int> misses;
    for (std::size_t e = 0; e < routing.by_expert.size(); ++e) {
        for (const auto& [row, w] : routing.by_expert[e]) {
            const std::int64_t q = row * K + filled[row]++;
            pair_e[q] = static_cast<std::uint32_t>(e);
            pair_w[q] = w;
            pair_of[e].push_back(q);
        }
        if (!routing.by_expert[e].empty() && tier_->slot_of(i, static_cast<int>(e)) == ExpertTier::kNoSlot)
            misses.push_back(static_cast<int>(e));
    }
    // The misses with many rows (a prompt chunk's) are streamed to the device, the most rows
    // first; the host computes the rest.
    std::vector<int> streamed;
    if (tier_->stream_batch() > 0 && tier_->stream_rows() > 0) {
        std::vector<int> host_side;
        for (int e : misses)
            (routing.by_expert[e].size() >= tier_->stream_rows() ? streamed : host_side).push_back(e);
        std::stable_sort(streamed.begin(), streamed.end(),
                         [&](int a, int b) { return routing.by_expert[a].size() > routing.by_expert[b].size(); });
        misses.swap(host_side);
    }
    const std::size_t at = route_stride_ * static_cast<std::size_t>(i);
    route_e_.write(pair_e.data(), pair_e.size() * 4, at);
    route_w_.write(pair_w.data(), pair_w.size() * 4);
    if (NS > 0) shared_wd_.write(routing.shared_w.data(), routing.shared_w.size() * 4);
    tier_->note_routes(i, pair_e);
    // Frame A2: the device's hits and the shared experts, not waited for.
    Frame& f = *f2_;
    f.begin();
    tier_->record_pairs(f, i, u32(P), u32(K), h_, {&route_e_, at, route_stride_}, pg_, pu_, py_, {&act_q_, &act_s_});
    f.barrier();
    shared_experts(f, i);
    submit_frame(f);
    // The streamed misses, a batch a stream half: staged while the device computes the hits
    // (and the batch before), copied and computed in a frame of their own.
    const std::uint32_t batch = tier_->stream_batch();
    std::uint64_t stream_pairs = 0;
    for (std::size_t first = 0, b = 0; first < streamed.size(); first += batch, ++b) {
        const int half = static_cast<int>(b % static_cast<std::size_t>(tier_->stream_halves()));
        Frame& g = *stream_frames_[static_cast<std::size_t>(half)];
        if (g.running()) wait_frame(g);  // the half's batch before: its staging and slots are reused
        // The batch in increasing id (the cache's rounds take them so), its weights from
        // the host's RAM cache (hits, or read now) or the mapped checkpoint.
        std::vector<int> part(streamed.begin() + static_cast<std::ptrdiff_t>(first),
                              streamed.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(first + batch, streamed.size())));
        std::sort(part.begin(), part.end());
        std::uint32_t staged = 0;
        host.visit(i, part, [&](std::span<const int> ids, const std::vector<const model::Ffn*>& w) {
            tier_->stage(half, staged, ids, w, host_pool_);
            staged += static_cast<std::uint32_t>(ids.size());
        });
        g.begin();
        g.barrier();  // after frame A2 and the batch before: they share the pairs' scratch
        tier_->record_stream(g, i, half, part, u32(P), u32(K), h_, {&route_e_, at, route_stride_}, pg_, pu_, py_,
                             {&act_q_, &act_s_});
        submit_frame(g);
        for (int e : part) stream_pairs += routing.by_expert[e].size();
    }
    stats_.stream_pairs += stream_pairs;
    // Meanwhile the host's misses, each pair's output into its row of y_host.
    host_pair_copies_.clear();
    std::uint64_t host_pairs = 0;
    if (!misses.empty()) {
        auto* y = static_cast<float*>(y_host_.data());
        host.run_pairs(i, routing, misses, R, h, pair_of, y);
        for (int e : misses)
            for (std::int64_t q : pair_of[e]) {
                const VkDeviceSize off = static_cast<VkDeviceSize>(q * D) * 4;
                host_pair_copies_.push_back({off, off, static_cast<VkDeviceSize>(D) * 4});
                ++host_pairs;
            }
    }
    stats_.host_pairs += host_pairs;
    stats_.device_pairs += static_cast<std::uint64_t>(P) - host_pairs;
    pending_moe_ = i;
    pending_tier_ = true;
}

void Chain::moe(int i, const forward::Routing& routing, const float* h, forward::HostExperts& host) {
    if (tier_ && tier_->has(i)) return moe_tier(i, routing, h, host);
    const std::int64_t D = c_.hidden, R = R_, NS = c_.shared_experts;
    if (NS > 0) {
        // Frame A2: the shared experts, submitted and not waited for, so they run while
        // the host computes the routed ones.
        Frame& f = *f2_;
        f.begin();
        shared_experts(f, i);
        submit_frame(f);
    }
    // The routed sum and the combine weights (A2 reads neither: the host writes them
    // while it runs); they join the residual at the start of the next frame.
    routed_host_.resize(static_cast<std::size_t>(R * D));
    stats_.host_pairs += static_cast<std::uint64_t>(R * c_.top_k);
    host.run(i, routing, R, h, routed_host_.data(), false);
    routed_.write(routed_host_.data(), routed_host_.size() * 4);
    if (NS > 0) shared_w_.write(routing.shared_w.data(), static_cast<std::size_t>(R * NS) * 4);
    pending_moe_ = i;
    pending_tier_ = false;
}

void Chain::head(const std::vector<std::int64_t>& out_rows, float* logits) { finish(out_rows, logits, nullptr); }

void Chain::hand_off(float* x) { finish({}, nullptr, x); }

void Chain::finish(const std::vector<std::int64_t>& out_rows, float* logits, float* x) {
    const std::int64_t D = c_.hidden, R = R_;
    const std::int64_t n_out = static_cast<std::int64_t>(out_rows.size());
    const bool with_head = logits != nullptr;
    const std::size_t out_bytes = static_cast<std::size_t>(with_head ? n_out * c_.unpadded_vocab : R * D) * 4;
    if (out_.size() < out_bytes) out_ = Buffer(*ctx_, out_bytes, Buffer::Kind::Host);
    Frame& f = a1();
    if (!f.recording()) {
        f.begin();
        f.barrier();
    }
    if (pending_moe_ >= 0) join_moe(f, pending_moe_), pending_moe_ = -1;
    apply_add(f);
    // The conv states to their host-visible twins (the step's last writes of them are
    // behind the barrier above), beside the final norm and lm_head.
    f.barrier();
    for (const Span& sp : spans_) {
        const Mirror& m = *mirrors_[sp.state];
        f.copy(*m.conv, 0, *m.conv_host, 0, m.conv->size());
    }
    std::vector<VkBufferCopy> routes;
    for (int i = 0; i < n_layers_; ++i)
        if (resident(i)) {
            const VkDeviceSize at = route_stride_ * static_cast<std::size_t>(i);
            routes.push_back({at, at, static_cast<VkDeviceSize>(R * c_.top_k) * 4});
        }
    f.copy_regions(route_e_dev_, route_e_, routes);
    if (with_head) {
        for (std::int64_t s = 0; s < n_out; ++s)
            rmsnorm(f, x_, u32(out_rows[s] * D), 1, u32(D), *final_norm_, h_, u32(s * D),
                    static_cast<float>(1.0 / c_.mup));
        f.barrier();
        gemv(f, *lm_head_, h_, 0, u32(n_out), out_, 0, u32(c_.unpadded_vocab));
    } else {
        f.copy(x_, 0, out_, 0, static_cast<std::size_t>(R * D) * 4);
    }
    run_frame(f);
    // The step's time: waiting for the device, and everything else on the host (recording,
    // the host's experts, uploads).
    stats_.device_wait_s += step_wait_s_;
    stats_.host_s += since(step_t0_) - step_wait_s_;
    // What the resident layers routed, for the host's usage counts.
    routes_.clear();
    for (int i = 0; i < n_layers_; ++i) {
        if (!resident(i)) continue;
        const auto* e = reinterpret_cast<const std::uint32_t*>(static_cast<const std::byte*>(route_e_.data()) +
                                                               route_stride_ * static_cast<std::size_t>(i));
        routes_.push_back({i, std::vector<std::uint32_t>(e, e + R * c_.top_k)});
        tier_->note_routes(i, routes_.back().experts);
    }
    if (tier_) tier_->note_tokens(static_cast<std::uint64_t>(R));
    // The host's states become current: K/V rows, conv states.
    const auto* kv = static_cast<const float*>(kv_down_.data());
    for (const Span& sp : spans_) {
        Mirror& m = *mirrors_[sp.state];
        for (int i = 0; i < n_layers_; ++i) {
            auto& L = sp.state->layers[i];
            const std::int64_t KV = L.kv_heads, hd = L.head_dim, kvd = KV * hd;
            const float* kd = kv + static_cast<std::size_t>(kv_stride_ * i);
            const float* vd = kd + R * kvd;
            for (std::int64_t s = std::max<std::int64_t>(0, sp.rows - L.rows); s < sp.rows; ++s) {
                const std::int64_t row = (sp.pos0 + s) % L.rows, src = sp.first + s;
                for (std::int64_t g = 0; g < KV; ++g) {
                    std::copy_n(kd + (src * KV + g) * hd, hd, L.k.data() + (g * L.rows + row) * hd);
                    std::copy_n(vd + (src * KV + g) * hd, hd, L.v.data() + (g * L.rows + row) * hd);
                }
            }
            const auto* conv = static_cast<const float*>(m.conv_host->data());
            for (int j = 0; j < 4; ++j) std::copy_n(conv + m.conv_at[i][j], L.conv[j].size(), L.conv[j].begin());
        }
        sp.state->device_token = m.token;
    }
    if (with_head) std::memcpy(logits, out_.data(), static_cast<std::size_t>(n_out * c_.unpadded_vocab) * 4);
    else std::memcpy(x, out_.data(), static_cast<std::size_t>(R * D) * 4);
    ++stats_.steps;  // one more step the device ran to its end
}

}  // namespace inkling::vulkan
