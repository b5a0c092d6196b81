#include "engine/forward/forward.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/cpu/kernels.h"

namespace inkling::forward {

using cpu::rmsnorm;

namespace {
constexpr double kAudioEps = 1e-6;  // the audio tower's norm: a literal, not rms_norm_eps
}

void short_conv(float* x, std::int64_t rows, std::int64_t channels, const float* w, int kernel, float* state) {
    const int taps = kernel - 1;
    std::vector<float> col(static_cast<std::size_t>(taps + rows));
    for (std::int64_t c = 0; c < channels; ++c) {
        float* st = state + c * taps;
        for (int j = 0; j < taps; ++j) col[j] = st[j];
        for (std::int64_t t = 0; t < rows; ++t) col[taps + t] = x[t * channels + c];
        const float* wc = w + c * kernel;
        for (std::int64_t t = 0; t < rows; ++t) {
            float acc = 0.0f;
            for (int j = 0; j < kernel; ++j) acc += wc[j] * col[t + j];
            x[t * channels + c] = col[taps + t] + acc;
        }
        for (int j = 0; j < taps; ++j) st[j] = col[rows + j];
    }
}

Forward::Forward(const model::Model& model, cpu::ThreadPool& pool)
    : model_(model), c_(model.config), w_(model.weights), pool_(pool) {}

void Forward::mm(const float* x, std::int64_t rows, const model::Matrix& w, float* y) {
    cpu::matmul(x, rows, w, y, pool_);
    weight_bytes_read_ += w.bytes();
}

void Forward::embed(std::span<const std::int32_t> ids, AudioCursor* audio, float* x, bool& used_audio) {
    const std::int64_t D = c_.hidden;
    std::vector<float> sum(static_cast<std::size_t>(D)), row(static_cast<std::size_t>(D));
    for (std::size_t s = 0; s < ids.size(); ++s) {
        const std::int32_t id = ids[s];
        if (id < 0 || id >= c_.vocab)
            throw std::runtime_error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                     std::to_string(c_.vocab - 1) + ")");
        float* out = x + s * D;
        if (audio && id == c_.audio_token && audio->next < audio->frame_count(c_.mel_bins)) {
            if (!w_.audio_encoder)
                throw std::runtime_error("audio frames given, but the model has no audio tower "
                                         "(model.audio.* tensors or audio.safetensors)");
            // Σ over bins of that bin's codebook row, then the audio RMSNorm.
            const std::uint8_t* frame = audio->frames.data() + audio->next * c_.mel_bins;
            std::fill(sum.begin(), sum.end(), 0.0f);
            for (int b = 0; b < c_.mel_bins; ++b) {
                int level = std::min<int>(frame[b], c_.mel_vocab - 1);
                cpu::row_f32(*w_.audio_encoder, static_cast<std::int64_t>(b) * c_.mel_vocab + level, row.data());
                for (std::int64_t d = 0; d < D; ++d) sum[d] += row[d];
            }
            rmsnorm(sum.data(), w_.audio_norm.data(), kAudioEps, D, out);
            ++audio->next;
            used_audio = true;
            continue;
        }
        cpu::row_f32(w_.embed, id, out);
        if (!w_.embed_norm.empty()) rmsnorm(out, w_.embed_norm.data(), c_.eps, D, out);
    }
}

void Forward::attention(int layer, SessionState& state, std::int64_t pos0, std::int64_t S, const float* h,
                        float* out) {
    const model::LayerWeights& L = w_.layers[layer];
    LayerState& st = state.layers[layer];
    const bool local = c_.kinds[layer].local;
    const std::int64_t H = c_.layer_heads(layer), KV = c_.layer_kv_heads(layer), hd = c_.layer_head_dim(layer);
    const std::int64_t ext = c_.layer_extent(layer), d_rel = c_.d_rel, kvd = KV * hd, group = H / KV;

    std::vector<float> q(static_cast<std::size_t>(S * H * hd)), k(static_cast<std::size_t>(S * kvd)),
        v(static_cast<std::size_t>(S * kvd)), r(static_cast<std::size_t>(S * H * d_rel));
    mm(h, S, L.wq, q.data());
    mm(h, S, L.wk, k.data());
    mm(h, S, L.wv, v.data());
    mm(h, S, L.wr, r.data());
    // K and V short convs act on the raw projections, before the head norms.
    short_conv(k.data(), S, kvd, L.k_conv.data(), c_.conv_kernel, st.conv[0].data());
    short_conv(v.data(), S, kvd, L.v_conv.data(), c_.conv_kernel, st.conv[1].data());
    for (std::int64_t s = 0; s < S; ++s) {
        for (std::int64_t hh = 0; hh < H; ++hh) {
            float* qh = q.data() + (s * H + hh) * hd;
            rmsnorm(qh, L.q_norm.data(), c_.eps, hd, qh);
        }
        for (std::int64_t g = 0; g < KV; ++g) {
            float* kh = k.data() + (s * KV + g) * hd;
            rmsnorm(kh, L.k_norm.data(), c_.eps, hd, kh);
        }
    }

    std::vector<float> ctx(static_cast<std::size_t>(S * H * hd));
    const float inv_hd = 1.0f / static_cast<float>(hd);
    auto key = [&](std::int64_t t, std::int64_t g) -> const float* {
        if (t >= pos0) return k.data() + ((t - pos0) * KV + g) * hd;
        return st.k.data() + (g * st.rows + t % st.rows) * hd;
    };
    auto value = [&](std::int64_t t, std::int64_t g) -> const float* {
        if (t >= pos0) return v.data() + ((t - pos0) * KV + g) * hd;
        return st.v.data() + (g * st.rows + t % st.rows) * hd;
    };
    auto one = [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> scores, bias;
        for (std::int64_t job = begin; job < end; ++job) {
            const std::int64_t s = job / H, hh = job % H, g = hh / group, p = pos0 + s;
            const std::int64_t t0 = local ? std::max<std::int64_t>(0, p - c_.window + 1) : 0;
            const std::int64_t n = p - t0 + 1;
            float tau = 1.0f;
            if (!local && c_.log_floor > 0) {
                double en = static_cast<double>(p + 1) / c_.log_floor;
                if (en > 1.0) tau = static_cast<float>(1.0 + c_.log_alpha * std::log(en));
            }
            // This head's bias for each backward distance it can see (zero past the bank).
            const std::int64_t nb = std::min(ext, n);
            bias.assign(static_cast<std::size_t>(nb), 0.0f);
            const float* rh = r.data() + (s * H + hh) * d_rel;
            for (std::int64_t d = 0; d < d_rel; ++d) {
                const float* bank = L.rel_bank.data() + d * ext;
                for (std::int64_t e = 0; e < nb; ++e) bias[e] += rh[d] * bank[e];
            }
            const float* qh = q.data() + (s * H + hh) * hd;
            scores.resize(static_cast<std::size_t>(n));
            float mx = -std::numeric_limits<float>::infinity();
            for (std::int64_t i = 0; i < n; ++i) {
                const std::int64_t t = t0 + i, dist = p - t;
                float sc = cpu::dot(qh, key(t, g), hd) * inv_hd + (dist < ext ? bias[dist] : 0.0f);
                sc *= tau;
                scores[i] = sc;
                mx = std::max(mx, sc);
            }
            float total = 0.0f;
            for (auto& sc : scores) total += (sc = std::exp(sc - mx));
            float* o = ctx.data() + (s * H + hh) * hd;
            std::fill(o, o + hd, 0.0f);
            for (std::int64_t i = 0; i < n; ++i) {
                const float pr = scores[i] / total;
                const float* vt = value(t0 + i, g);
                for (std::int64_t d = 0; d < hd; ++d) o[d] += pr * vt[d];
            }
        }
    };
    if (S * H * (pos0 + S) < 4096) one(0, S * H);
    else pool_.parallel_for(S * H, one);

    // The block's K/V rows join the cache after scoring; rows a ring would overwrite
    // within this same block are skipped.
    for (std::int64_t s = std::max<std::int64_t>(0, S - st.rows); s < S; ++s) {
        const std::int64_t row = (pos0 + s) % st.rows;
        for (std::int64_t g = 0; g < KV; ++g) {
            std::copy_n(k.data() + (s * KV + g) * hd, hd, st.k.data() + (g * st.rows + row) * hd);
            std::copy_n(v.data() + (s * KV + g) * hd, hd, st.v.data() + (g * st.rows + row) * hd);
        }
    }
    mm(ctx.data(), S, L.wo, out);
}

void Forward::ffn(const model::Ffn& f, std::int64_t rows, const float* x, float* out) {
    const std::int64_t I = f.gate.rows;
    std::vector<float> gate(static_cast<std::size_t>(rows * I)), up(static_cast<std::size_t>(rows * I));
    mm(x, rows, f.gate, gate.data());
    mm(x, rows, f.up, up.data());
    for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = cpu::silu(gate[i]) * up[i];
    mm(gate.data(), rows, f.down, out);
}

void Forward::mlp(int layer, std::int64_t S, const float* h, float* out) {
    const model::LayerWeights& L = w_.layers[layer];
    ffn(L.dense, S, h, out);
    if (L.dense_scale != 1.0f)
        for (std::int64_t i = 0; i < S * c_.hidden; ++i) out[i] *= L.dense_scale;
}

void Forward::moe(int layer, std::int64_t S, const float* h, float* out) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t D = c_.hidden, E = c_.experts, NS = c_.shared_experts, K = c_.top_k;
    std::vector<float> logits(static_cast<std::size_t>(S * (E + NS)));
    mm(h, S, L.router, logits.data());

    // Selection by sigmoid + correction bias (ties to the lowest id); combine weights are
    // plain sigmoids normalised together with the shared experts' own.
    std::vector<std::vector<std::pair<std::int64_t, float>>> by_expert(static_cast<std::size_t>(E));
    std::vector<float> shared_w(static_cast<std::size_t>(S * NS));
    std::vector<float> choice(static_cast<std::size_t>(E));
    std::vector<char> taken(static_cast<std::size_t>(E));
    for (std::int64_t s = 0; s < S; ++s) {
        const float* lg = logits.data() + s * (E + NS);
        for (std::int64_t e = 0; e < E; ++e) choice[e] = cpu::sigmoid(lg[e]) + L.router_bias[e];
        std::fill(taken.begin(), taken.end(), 0);
        std::vector<std::int64_t> chosen;
        for (std::int64_t kk = 0; kk < K; ++kk) {
            std::int64_t best = -1;
            for (std::int64_t e = 0; e < E; ++e)
                if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
            taken[best] = 1;
            chosen.push_back(best);
        }
        float z = 0.0f;
        for (auto e : chosen) z += cpu::sigmoid(lg[e]);
        for (std::int64_t j = 0; j < NS; ++j) z += cpu::sigmoid(lg[E + j]);
        const float scale = static_cast<float>(c_.route_scale) * L.router_scale / z;
        for (auto e : chosen) by_expert[e].emplace_back(s, cpu::sigmoid(lg[e]) * scale);
        for (std::int64_t j = 0; j < NS; ++j) shared_w[s * NS + j] = cpu::sigmoid(lg[E + j]) * scale;
    }

    // Routed experts in increasing id order (each row's sum has the same order however the
    // rows are batched); each expert runs once over all rows routed to it.
    std::fill(out, out + S * D, 0.0f);
    std::vector<float> xs, ys;
    for (std::int64_t e = 0; e < E; ++e) {
        const auto& rows = by_expert[e];
        if (rows.empty()) continue;
        const std::int64_t n = static_cast<std::int64_t>(rows.size());
        xs.resize(static_cast<std::size_t>(n * D));
        ys.resize(static_cast<std::size_t>(n * D));
        for (std::int64_t i = 0; i < n; ++i) std::copy_n(h + rows[i].first * D, D, xs.data() + i * D);
        ffn(L.experts[e], n, xs.data(), ys.data());
        for (std::int64_t i = 0; i < n; ++i) {
            float* o = out + rows[i].first * D;
            const float wgt = rows[i].second;
            for (std::int64_t d = 0; d < D; ++d) o[d] += wgt * ys[i * D + d];
        }
    }
    if (NS == 0) return;
    // Shared experts: every row, summed on their own, then added to the routed sum.
    std::vector<float> shared_sum(static_cast<std::size_t>(S * D), 0.0f);
    ys.resize(static_cast<std::size_t>(S * D));
    for (std::int64_t j = 0; j < NS; ++j) {
        ffn(L.shared[j], S, h, ys.data());
        for (std::int64_t s = 0; s < S; ++s)
            for (std::int64_t d = 0; d < D; ++d) shared_sum[s * D + d] += shared_w[s * NS + j] * ys[s * D + d];
    }
    for (std::int64_t i = 0; i < S * D; ++i) out[i] += shared_sum[i];
}

std::vector<float> Forward::step(SessionState& state, std::span<const std::int32_t> ids, AudioCursor* audio,
                                 bool all_rows) {
    const std::int64_t S = static_cast<std::int64_t>(ids.size()), D = c_.hidden, U = c_.unpadded_vocab;
    if (S == 0) return {};
    if (state.len + S > state.capacity)
        throw std::runtime_error("context full: " + std::to_string(state.len) + " + " + std::to_string(S) +
                                 " positions exceed the capacity of " + std::to_string(state.capacity));
    const std::int64_t pos0 = state.len;
    std::vector<float> x(static_cast<std::size_t>(S * D)), h(x.size()), a(x.size());
    bool used_audio = false;
    embed(ids, audio, x.data(), used_audio);

    for (int i = 0; i < c_.layers; ++i) {
        const model::LayerWeights& L = w_.layers[i];
        LayerState& st = state.layers[i];
        for (std::int64_t s = 0; s < S; ++s) rmsnorm(x.data() + s * D, L.attn_norm.data(), c_.eps, D, h.data() + s * D);
        attention(i, state, pos0, S, h.data(), a.data());
        short_conv(a.data(), S, D, L.attn_conv.data(), c_.conv_kernel, st.conv[2].data());
        for (std::int64_t j = 0; j < S * D; ++j) x[j] += a[j];
        for (std::int64_t s = 0; s < S; ++s) rmsnorm(x.data() + s * D, L.mlp_norm.data(), c_.eps, D, h.data() + s * D);
        if (c_.kinds[i].sparse) moe(i, S, h.data(), a.data());
        else mlp(i, S, h.data(), a.data());
        short_conv(a.data(), S, D, L.mlp_conv.data(), c_.conv_kernel, st.conv[3].data());
        for (std::int64_t j = 0; j < S * D; ++j) x[j] += a[j];
    }
    state.len += S;
    state.fed.insert(state.fed.end(), ids.begin(), ids.end());
    if (used_audio) state.tainted = true;

    const std::int64_t first = all_rows ? 0 : S - 1, n_out = S - first;
    std::vector<float> y(static_cast<std::size_t>(n_out * D));
    const float inv_mup = static_cast<float>(1.0 / c_.mup);
    for (std::int64_t s = 0; s < n_out; ++s) {
        float* ys = y.data() + s * D;
        rmsnorm(x.data() + (first + s) * D, w_.final_norm.data(), c_.eps, D, ys);
        for (std::int64_t d = 0; d < D; ++d) ys[d] *= inv_mup;
    }
    std::vector<float> logits(static_cast<std::size_t>(n_out * U));
    mm(y.data(), n_out, w_.lm_head, logits.data());
    return logits;
}

}  // namespace inkling::forward
