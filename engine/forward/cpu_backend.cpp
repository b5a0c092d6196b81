#include "engine/forward/cpu_backend.h"

#include <algorithm>

#include "engine/cpu/kernels.h"
#include "engine/cpu/thread_scratch.h"
#include "engine/forward/attention.h"
#include "engine/forward/forward.h"
#include "engine/forward/gate_up.h"
#include "engine/forward/host_experts.h"

namespace inkling::forward {

using cpu::rmsnorm;

CpuBackend::CpuBackend(const model::Model& model, Meter& meter)
    : c_(model.config), w_(model.weights), meter_(meter) {}

void CpuBackend::begin(std::span<const Span> spans, std::int64_t rows, float* x) {
    spans_.assign(spans.begin(), spans.end());
    rows_ = rows;
    x_ = x;
    cpu::at_least(h_, static_cast<std::size_t>(rows * c_.hidden));
    cpu::at_least(a_, static_cast<std::size_t>(rows * c_.hidden));
}

std::vector<const model::Matrix*> CpuBackend::after_attention(int layer) const {
    const model::LayerWeights& L = w_.layers[layer];
    std::vector<const model::Matrix*> next;
    if (!c_.kinds[layer].sparse) {
        add_gate_up_weights(L.dense, next);
        return next;
    }
    // The router, then the group of every expert's gate/up, whose routed part is not known
    // yet: the shared experts' are.
    next.push_back(&L.router);
    for (const model::Ffn& f : L.shared) add_gate_up_weights(f, next);
    return next;
}

std::vector<const model::Matrix*> CpuBackend::after_layer(int layer) const {
    if (layer + 1 >= c_.layers) return {&w_.lm_head};
    const model::LayerWeights& N = w_.layers[layer + 1];
    return {&N.wq, &N.wk, &N.wv, &N.wr};
}

void CpuBackend::conv_add(int layer, int which, const std::vector<float>& conv_w) {
    const std::int64_t D = c_.hidden;
    for (const Span& sp : spans_)
        short_conv(a_.data() + sp.first * D, sp.rows, D, conv_w.data(), c_.conv_kernel,
                   sp.state->layers[layer].conv[which].data());
    for (std::int64_t j = 0; j < rows_ * D; ++j) x_[j] += a_[j];
}

void CpuBackend::attention(int layer) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t R = rows_, D = c_.hidden;
    const std::int64_t H = c_.layer_heads(layer), KV = c_.layer_kv_heads(layer), hd = c_.layer_head_dim(layer);
    const std::int64_t kvd = KV * hd;
    auto& times = meter_.times();
    auto t = Meter::Clock::now();
    cpu::rmsnorm_rows(x_, L.attn_norm.data(), c_.eps, D, R, h_.data(), meter_.pool());
    Meter::lap(t, times.convs_norms);

    float* q = cpu::at_least(q_, static_cast<std::size_t>(R * H * hd));
    float* k = cpu::at_least(k_, static_cast<std::size_t>(R * kvd));
    float* v = cpu::at_least(v_, static_cast<std::size_t>(R * kvd));
    float* r = cpu::at_least(r_, static_cast<std::size_t>(R * H * c_.d_rel));
    const float* h = h_.data();
    // The output projection is warmed while the convs, norms and attention run.
    const model::Matrix* const wo = &L.wo;
    meter_.mm_group({{h, R, &L.wq, q}, {h, R, &L.wk, k}, {h, R, &L.wv, v}, {h, R, &L.wr, r}}, std::span(&wo, 1));
    // K and V short convs act on the raw projections, before the head norms; each
    // session's rows continue that session's conv history.
    for (const Span& sp : spans_) {
        LayerState& st = sp.state->layers[layer];
        short_conv(k + sp.first * kvd, sp.rows, kvd, L.k_conv.data(), c_.conv_kernel, st.conv[0].data());
        short_conv(v + sp.first * kvd, sp.rows, kvd, L.v_conv.data(), c_.conv_kernel, st.conv[1].data());
    }
    cpu::rmsnorm_rows(q, L.q_norm.data(), c_.eps, hd, R * H, q, meter_.pool());
    cpu::rmsnorm_rows(k, L.k_norm.data(), c_.eps, hd, R * KV, k, meter_.pool());
    float* ctx = cpu::at_least(ctx_, static_cast<std::size_t>(R * H * hd));
    const AttentionView view{c_, layer, L.rel_bank.data(), spans_, q, k, v, r};
    attend(view, R, &meter_.pool(), ctx);

    // Each block's K/V rows join its cache after scoring; rows a ring would overwrite
    // within the same block are skipped.
    for (const Span& sp : spans_) {
        LayerState& st = sp.state->layers[layer];
        for (std::int64_t s = std::max<std::int64_t>(0, sp.rows - st.rows); s < sp.rows; ++s) {
            const std::int64_t row = (sp.pos0 + s) % st.rows, src = sp.first + s;
            for (std::int64_t g = 0; g < KV; ++g) {
                std::copy_n(k + (src * KV + g) * hd, hd, st.k.data() + (g * st.rows + row) * hd);
                std::copy_n(v + (src * KV + g) * hd, hd, st.v.data() + (g * st.rows + row) * hd);
            }
        }
    }
    meter_.mm(ctx, R, L.wo, a_.data(), after_attention(layer));
    Meter::lap(t, times.attention);
    conv_add(layer, 2, L.attn_conv);
    Meter::lap(t, times.convs_norms);
}

void CpuBackend::ffn(const model::Ffn& f, std::int64_t rows, const float* x, float* out,
                     std::span<const model::Matrix* const> then) {
    float* gu = cpu::at_least(gu_, static_cast<std::size_t>(gate_up_floats(f, rows)));
    std::vector<cpu::MatJob> jobs;
    add_gate_up_jobs(f, x, rows, gu, jobs);
    const model::Matrix* const down = &f.down;
    meter_.mm_group(jobs, std::span(&down, 1));
    swiglu_in_place(f, rows, gu);
    meter_.mm(gu, rows, f.down, out, then);
}

void CpuBackend::dense_mlp(int layer) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t R = rows_, D = c_.hidden;
    auto& times = meter_.times();
    auto t = Meter::Clock::now();
    cpu::rmsnorm_rows(x_, L.mlp_norm.data(), c_.eps, D, R, h_.data(), meter_.pool());
    Meter::lap(t, times.convs_norms);
    ffn(L.dense, R, h_.data(), a_.data(), after_layer(layer));
    if (L.dense_scale != 1.0f)
        for (std::int64_t i = 0; i < R * D; ++i) a_[i] *= L.dense_scale;
    Meter::lap(t, times.dense);
    conv_add(layer, 3, L.mlp_conv);
    Meter::lap(t, times.convs_norms);
}

void CpuBackend::router(int layer, float* h, float* logits) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t R = rows_, D = c_.hidden;
    auto& times = meter_.times();
    auto t = Meter::Clock::now();
    cpu::rmsnorm_rows(x_, L.mlp_norm.data(), c_.eps, D, R, h, meter_.pool());
    Meter::lap(t, times.convs_norms);
    meter_.mm(h, R, L.router, logits);
    Meter::lap(t, times.router);
}

void CpuBackend::moe(int layer, const Routing& routing, const float* h, HostExperts& host) {
    host.run(layer, routing, rows_, h, a_.data(), true, after_layer(layer));
    auto t = Meter::Clock::now();
    conv_add(layer, 3, w_.layers[layer].mlp_conv);
    Meter::lap(t, meter_.times().convs_norms);
}

void CpuBackend::head(const std::vector<std::int64_t>& out_rows, float* logits) {
    // The final norm, ÷ mup and lm_head of those rows at once.
    const std::int64_t D = c_.hidden, n = static_cast<std::int64_t>(out_rows.size());
    auto t = Meter::Clock::now();
    float* y = cpu::at_least(gu_, static_cast<std::size_t>(n * D));
    const float inv_mup = static_cast<float>(1.0 / c_.mup);
    for (std::int64_t s = 0; s < n; ++s) {
        float* ys = y + s * D;
        rmsnorm(x_ + out_rows[s] * D, w_.final_norm.data(), c_.eps, D, ys);
        for (std::int64_t d = 0; d < D; ++d) ys[d] *= inv_mup;
    }
    std::fill(logits, logits + n * c_.unpadded_vocab, 0.0f);
    meter_.mm(y, n, w_.lm_head, logits, after_layer(-1));
    Meter::lap(t, meter_.times().head);
}

}  // namespace inkling::forward
