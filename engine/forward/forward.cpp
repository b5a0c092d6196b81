#include "engine/forward/forward.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/cpu/kernels.h"
#include "engine/forward/attention_math.h"
#include "engine/vulkan/chain.h"

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

Forward::Forward(const model::Model& model, cpu::ThreadPool& pool, std::shared_ptr<experts::ExpertCache> cache)
    : model_(model), c_(model.config), w_(model.weights), pool_(pool), cache_(std::move(cache)) {
    for (int i = 0; i < c_.layers; ++i)
        expert_uses_.emplace_back(c_.kinds[i].sparse ? static_cast<std::size_t>(c_.experts) : 0, 0);
    if (model.experts && !cache_) {
        experts::CacheOptions o;
        o.cap = experts::default_cap(*model.experts, w_.matrix_bytes);
        cache_ = std::make_shared<experts::ExpertCache>(model.experts, o);
    }
    if (cache_ && !model.experts) throw std::logic_error("an expert cache for a model without experts.inkx");
}

namespace {
// Adds the seconds since `t` to `total` and restarts `t`.
void lap(std::chrono::steady_clock::time_point& t, double& total) {
    auto now = std::chrono::steady_clock::now();
    total += std::chrono::duration<double>(now - t).count();
    t = now;
}
}  // namespace

void Forward::mm(const float* x, std::int64_t rows, const model::Matrix& w, float* y) {
    cpu::matmul(x, rows, w, y, pool_);
    weight_bytes_read_ += w.bytes();
}

void Forward::mm_group(const std::vector<cpu::MatJob>& jobs) {
    cpu::matmul_group(jobs, pool_);
    for (const auto& j : jobs) weight_bytes_read_ += j.w->bytes();
}

void Forward::embed(std::span<const std::int32_t> ids, AudioCursor* audio, float* x, bool& used_audio) {
    const std::int64_t D = c_.hidden;
    std::vector<float> sum(static_cast<std::size_t>(D)), row(static_cast<std::size_t>(D));
    for (std::size_t s = 0; s < ids.size(); ++s) {
        const std::int32_t id = ids[s];
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

void Forward::attention(int layer, const std::vector<Span>& spans, std::int64_t R, const float* h, float* out) {
    const model::LayerWeights& L = w_.layers[layer];
    const bool local = c_.kinds[layer].local;
    const std::int64_t H = c_.layer_heads(layer), KV = c_.layer_kv_heads(layer), hd = c_.layer_head_dim(layer);
    const std::int64_t ext = c_.layer_extent(layer), d_rel = c_.d_rel, kvd = KV * hd, group = H / KV;

    std::vector<float> q(static_cast<std::size_t>(R * H * hd)), k(static_cast<std::size_t>(R * kvd)),
        v(static_cast<std::size_t>(R * kvd)), r(static_cast<std::size_t>(R * H * d_rel));
    mm_group({{h, R, &L.wq, q.data()}, {h, R, &L.wk, k.data()}, {h, R, &L.wv, v.data()}, {h, R, &L.wr, r.data()}});
    // K and V short convs act on the raw projections, before the head norms; each
    // session's rows continue that session's conv history.
    for (const Span& sp : spans) {
        LayerState& st = sp.state->layers[layer];
        short_conv(k.data() + sp.first * kvd, sp.rows, kvd, L.k_conv.data(), c_.conv_kernel, st.conv[0].data());
        short_conv(v.data() + sp.first * kvd, sp.rows, kvd, L.v_conv.data(), c_.conv_kernel, st.conv[1].data());
    }
    for (std::int64_t s = 0; s < R; ++s) {
        for (std::int64_t hh = 0; hh < H; ++hh) {
            float* qh = q.data() + (s * H + hh) * hd;
            rmsnorm(qh, L.q_norm.data(), c_.eps, hd, qh);
        }
        for (std::int64_t g = 0; g < KV; ++g) {
            float* kh = k.data() + (s * KV + g) * hd;
            rmsnorm(kh, L.k_norm.data(), c_.eps, hd, kh);
        }
    }

    // One job per (row, head) over all sessions.
    std::vector<std::int32_t> span_of(static_cast<std::size_t>(R));
    std::int64_t work = 0;
    for (std::size_t b = 0; b < spans.size(); ++b) {
        for (std::int64_t s = 0; s < spans[b].rows; ++s) span_of[spans[b].first + s] = static_cast<std::int32_t>(b);
        work += spans[b].rows * H * (spans[b].pos0 + spans[b].rows);
    }
    std::vector<float> ctx(static_cast<std::size_t>(R * H * hd));
    const float inv_hd = 1.0f / static_cast<float>(hd);
    auto one = [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> scores, bias;
        for (std::int64_t job = begin; job < end; ++job) {
            const std::int64_t row = job / H, hh = job % H, g = hh / group;
            const Span& sp = spans[span_of[row]];
            const LayerState& st = sp.state->layers[layer];
            const std::int64_t p = sp.pos0 + (row - sp.first);
            // Keys of this block come from the fresh rows, older ones from the cache.
            auto key = [&](std::int64_t t) -> const float* {
                if (t >= sp.pos0) return k.data() + ((sp.first + t - sp.pos0) * KV + g) * hd;
                return st.k.data() + (g * st.rows + t % st.rows) * hd;
            };
            auto value = [&](std::int64_t t) -> const float* {
                if (t >= sp.pos0) return v.data() + ((sp.first + t - sp.pos0) * KV + g) * hd;
                return st.v.data() + (g * st.rows + t % st.rows) * hd;
            };
            const std::int64_t t0 = local ? std::max<std::int64_t>(0, p - c_.window + 1) : 0;
            const std::int64_t n = p - t0 + 1;
            const float tau = attention_tau(c_, layer, p);
            // This head's bias for each backward distance it can see (zero past the bank).
            const std::int64_t nb = std::min(ext, n);
            bias.assign(static_cast<std::size_t>(nb), 0.0f);
            const float* rh = r.data() + (row * H + hh) * d_rel;
            for (std::int64_t d = 0; d < d_rel; ++d) {
                const float* bank = L.rel_bank.data() + d * ext;
                for (std::int64_t e = 0; e < nb; ++e) bias[e] += rh[d] * bank[e];
            }
            const float* qh = q.data() + (row * H + hh) * hd;
            scores.resize(static_cast<std::size_t>(n));
            float mx = -std::numeric_limits<float>::infinity();
            for (std::int64_t i = 0; i < n; ++i) {
                const std::int64_t t = t0 + i, dist = p - t;
                const float sc = attention_score(cpu::dot(qh, key(t), hd), inv_hd, dist < ext ? bias[dist] : 0.0f, tau);
                scores[i] = sc;
                mx = std::max(mx, sc);
            }
            float total = 0.0f;
            for (auto& sc : scores) total += (sc = std::exp(sc - mx));
            float* o = ctx.data() + (row * H + hh) * hd;
            std::fill(o, o + hd, 0.0f);
            for (std::int64_t i = 0; i < n; ++i) {
                const float pr = scores[i] / total;
                const float* vt = value(t0 + i);
                for (std::int64_t d = 0; d < hd; ++d) o[d] += pr * vt[d];
            }
        }
    };
    if (work < 4096) one(0, R * H);
    else pool_.parallel_for(R * H, one);

    // Each block's K/V rows join its cache after scoring; rows a ring would overwrite
    // within the same block are skipped.
    for (const Span& sp : spans) {
        LayerState& st = sp.state->layers[layer];
        for (std::int64_t s = std::max<std::int64_t>(0, sp.rows - st.rows); s < sp.rows; ++s) {
            const std::int64_t row = (sp.pos0 + s) % st.rows, src = sp.first + s;
            for (std::int64_t g = 0; g < KV; ++g) {
                std::copy_n(k.data() + (src * KV + g) * hd, hd, st.k.data() + (g * st.rows + row) * hd);
                std::copy_n(v.data() + (src * KV + g) * hd, hd, st.v.data() + (g * st.rows + row) * hd);
            }
        }
    }
    mm(ctx.data(), R, L.wo, out);
}

void Forward::ffn(const model::Ffn& f, std::int64_t rows, const float* x, float* out) {
    const std::int64_t I = f.gate.rows;
    std::vector<float> gate(static_cast<std::size_t>(rows * I)), up(static_cast<std::size_t>(rows * I));
    mm_group({{x, rows, &f.gate, gate.data()}, {x, rows, &f.up, up.data()}});
    for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = cpu::silu(gate[i]) * up[i];
    mm(gate.data(), rows, f.down, out);
}

void Forward::mlp(int layer, std::int64_t S, const float* h, float* out) {
    const model::LayerWeights& L = w_.layers[layer];
    ffn(L.dense, S, h, out);
    if (L.dense_scale != 1.0f)
        for (std::int64_t i = 0; i < S * c_.hidden; ++i) out[i] *= L.dense_scale;
}

namespace {
// The top `k` experts of one row by sigmoid + correction bias (ties to the lowest id).
void select_experts(const float* lg, const std::vector<float>& bias, std::int64_t E, std::int64_t K,
                    std::vector<float>& choice, std::vector<char>& taken, std::vector<std::int64_t>& chosen) {
    for (std::int64_t e = 0; e < E; ++e) choice[e] = cpu::sigmoid(lg[e]) + bias[e];
    std::fill(taken.begin(), taken.end(), 0);
    chosen.clear();
    for (std::int64_t kk = 0; kk < K; ++kk) {
        std::int64_t best = -1;
        for (std::int64_t e = 0; e < E; ++e)
            if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
        taken[best] = 1;
        chosen.push_back(best);
    }
}
}  // namespace

void Forward::moe(int layer, std::int64_t S, const float* h, float* out, const float* router_logits,
                  std::vector<float>* device_shared_w) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t D = c_.hidden, E = c_.experts, NS = c_.shared_experts, K = c_.top_k;
    auto t = std::chrono::steady_clock::now();
    std::vector<float> logits;
    if (router_logits) {
        logits.assign(router_logits, router_logits + S * (E + NS));
    } else {
        logits.resize(static_cast<std::size_t>(S * (E + NS)));
        mm(h, S, L.router, logits.data());
    }

    // Selection by sigmoid + correction bias (ties to the lowest id); combine weights are
    // plain sigmoids normalised together with the shared experts' own.
    RowWeights by_expert(static_cast<std::size_t>(E));
    std::vector<float> shared_w(static_cast<std::size_t>(S * NS));
    std::vector<float> choice(static_cast<std::size_t>(E));
    std::vector<char> taken(static_cast<std::size_t>(E));
    std::vector<std::int64_t> chosen;
    for (std::int64_t s = 0; s < S; ++s) {
        const float* lg = logits.data() + s * (E + NS);
        select_experts(lg, L.router_bias, E, K, choice, taken, chosen);
        float z = 0.0f;
        for (auto e : chosen) z += cpu::sigmoid(lg[e]);
        for (std::int64_t j = 0; j < NS; ++j) z += cpu::sigmoid(lg[E + j]);
        const float scale = static_cast<float>(c_.route_scale) * L.router_scale / z;
        for (auto e : chosen) by_expert[e].emplace_back(s, cpu::sigmoid(lg[e]) * scale);
        for (std::int64_t j = 0; j < NS; ++j) shared_w[s * NS + j] = cpu::sigmoid(lg[E + j]) * scale;
    }

    std::vector<int> used;  // the experts this block routes to, in increasing id
    for (std::int64_t e = 0; e < E; ++e) {
        const auto n = by_expert[e].size();
        expert_uses_[layer][e] += n;
        if (n == 0) continue;
        used.push_back(static_cast<int>(e));
        if (cache_) cache_->record_use(layer, static_cast<int>(e), n);
    }
    if (cache_) prefetch_after(layer, S, h);
    lap(t, times_.router);
    // Routed contributions in increasing expert id (each row's sum has the same order
    // however rows are batched, and however many rounds the cache needs); the shared
    // experts summed on their own, then added.
    std::fill(out, out + S * D, 0.0f);
    std::vector<std::vector<float>> shared_y;
    auto* host_shared = device_shared_w ? nullptr : &shared_y;  // the device runs them
    if (!cache_) {
        std::vector<const model::Ffn*> f;
        for (int e : used) f.push_back(&L.experts[e]);
        expert_round(layer, used, f, by_expert, S, h, out, host_shared);
    } else {
        // Rounds of at most `cap` experts: acquire (reading the misses), compute, release.
        for (std::size_t at = 0; at < used.size();) {
            const std::span<const int> rest = std::span(used).subspan(at);
            const std::size_t n = cache_->round_size(layer, rest);
            lap(t, times_.experts);
            auto lease = cache_->acquire(layer, rest.first(n));
            lap(t, times_.expert_io);
            std::vector<const model::Ffn*> f;
            for (const auto& ffn : lease.ffn()) f.push_back(&ffn);
            expert_round(layer, rest.first(n), f, by_expert, S, h, out, at == 0 ? host_shared : nullptr);
            at += n;
        }
    }
    if (device_shared_w) {
        *device_shared_w = std::move(shared_w);
    } else if (NS > 0) {
        std::vector<float> shared_sum(static_cast<std::size_t>(S * D), 0.0f);
        for (std::int64_t j = 0; j < NS; ++j) {
            const std::vector<float>& y = shared_y[j];
            for (std::int64_t s = 0; s < S; ++s)
                for (std::int64_t d = 0; d < D; ++d) shared_sum[s * D + d] += shared_w[s * NS + j] * y[s * D + d];
        }
        for (std::int64_t i = 0; i < S * D; ++i) out[i] += shared_sum[i];
    }
    lap(t, times_.experts);
}

void Forward::expert_round(int layer, std::span<const int> ids, const std::vector<const model::Ffn*>& f,
                           const RowWeights& by_expert, std::int64_t S, const float* h, float* out,
                           std::vector<std::vector<float>>* shared_y) {
    const model::LayerWeights& L = w_.layers[layer];
    const std::int64_t D = c_.hidden, NS = c_.shared_experts;
    // Every expert of the round — the routed ones over the rows routed to them, the
    // shared ones over all rows — in two grouped passes (gate+up, then down), so each
    // expert's weights are read once and the threads are handed work twice.
    struct Run {
        const model::Ffn* f;
        std::int64_t rows;
        const float* x;
        std::vector<float> xs, gate, up, y;
    };
    std::vector<Run> runs;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto& rows = by_expert[ids[i]];
        Run r{f[i], static_cast<std::int64_t>(rows.size()), nullptr, {}, {}, {}, {}};
        r.xs.resize(static_cast<std::size_t>(r.rows * D));
        for (std::int64_t n = 0; n < r.rows; ++n) std::copy_n(h + rows[n].first * D, D, r.xs.data() + n * D);
        r.x = r.xs.data();
        runs.push_back(std::move(r));
    }
    if (shared_y)
        for (std::int64_t j = 0; j < NS; ++j) runs.push_back({&L.shared[j], S, h, {}, {}, {}, {}});
    std::vector<cpu::MatJob> jobs;
    for (auto& r : runs) {
        const std::int64_t I = r.f->gate.rows;
        r.gate.resize(static_cast<std::size_t>(r.rows * I));
        r.up.resize(r.gate.size());
        jobs.push_back({r.x, r.rows, &r.f->gate, r.gate.data()});
        jobs.push_back({r.x, r.rows, &r.f->up, r.up.data()});
    }
    mm_group(jobs);
    jobs.clear();
    for (auto& r : runs) {
        for (std::size_t i = 0; i < r.gate.size(); ++i) r.gate[i] = cpu::silu(r.gate[i]) * r.up[i];
        r.y.resize(static_cast<std::size_t>(r.rows * D));
        jobs.push_back({r.gate.data(), r.rows, &r.f->down, r.y.data()});
    }
    mm_group(jobs);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto& rows = by_expert[ids[i]];
        const Run& r = runs[i];
        for (std::int64_t n = 0; n < r.rows; ++n) {
            float* o = out + rows[n].first * D;
            const float wgt = rows[n].second;
            for (std::int64_t d = 0; d < D; ++d) o[d] += wgt * r.y[n * D + d];
        }
    }
    if (shared_y)
        for (std::size_t i = ids.size(); i < runs.size(); ++i) shared_y->push_back(std::move(runs[i].y));
}

void Forward::prefetch_after(int layer, std::int64_t S, const float* h) {
    if (!cache_->prefetch_enabled()) return;
    int next = layer + 1;
    while (next < c_.layers && !c_.kinds[next].sparse) ++next;
    if (next >= c_.layers) return;
    // The next sparse layer's router applied to this layer's MoE input: its input will be
    // this plus one more layer's update, close enough to guess which experts it picks.
    const model::LayerWeights& N = w_.layers[next];
    const std::int64_t E = c_.experts, NS = c_.shared_experts, K = c_.top_k;
    std::vector<float> logits(static_cast<std::size_t>(S * (E + NS)));
    mm(h, S, N.router, logits.data());
    std::vector<float> choice(static_cast<std::size_t>(E));
    std::vector<char> taken(static_cast<std::size_t>(E)), wanted(static_cast<std::size_t>(E), 0);
    std::vector<std::int64_t> chosen;
    for (std::int64_t s = 0; s < S; ++s) {
        select_experts(logits.data() + s * (E + NS), N.router_bias, E, K, choice, taken, chosen);
        for (auto e : chosen) wanted[e] = 1;
    }
    // Lowest ids first: the next layer's first round takes those.
    std::vector<int> ids;
    for (std::int64_t e = 0; e < E; ++e)
        if (wanted[e]) ids.push_back(static_cast<int>(e));
    cache_->prefetch(next, ids);
}

std::vector<float> Forward::step(SessionState& state, std::span<const std::int32_t> ids, AudioCursor* audio,
                                 bool all_rows) {
    if (ids.empty()) return {};
    Block block{&state, ids, audio, all_rows};
    return std::move(step_batch(std::span(&block, 1))[0]);
}

std::vector<std::vector<float>> Forward::step_batch(std::span<const Block> blocks) {
    const std::int64_t D = c_.hidden, U = c_.unpadded_vocab;
    std::vector<Span> spans;
    std::int64_t R = 0;
    for (const Block& b : blocks) {
        const std::int64_t S = static_cast<std::int64_t>(b.ids.size());
        if (S == 0) throw std::runtime_error("a block with no ids");
        if (b.state->len + S > b.state->capacity)
            throw std::runtime_error("context full: " + std::to_string(b.state->len) + " + " + std::to_string(S) +
                                     " positions exceed the capacity of " + std::to_string(b.state->capacity));
        for (const Span& other : spans)
            if (other.state == b.state) throw std::runtime_error("one session twice in a batch");
        for (std::int32_t id : b.ids)
            if (id < 0 || id >= c_.vocab)
                throw std::runtime_error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                         std::to_string(c_.vocab - 1) + ")");
        spans.push_back({b.state, R, S, b.state->len});
        R += S;
    }
    auto t = std::chrono::steady_clock::now();
    std::vector<float> x(static_cast<std::size_t>(R * D)), h(x.size()), a(x.size());
    std::vector<char> used_audio(blocks.size(), 0);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        bool used = false;
        embed(blocks[b].ids, blocks[b].audio, x.data() + spans[b].first * D, used);
        used_audio[b] = used;
    }
    lap(t, times_.embed);

    // The rows whose logits are wanted.
    std::vector<std::int64_t> out_rows;
    for (std::size_t b = 0; b < blocks.size(); ++b)
        for (std::int64_t s = blocks[b].all_rows ? 0 : spans[b].rows - 1; s < spans[b].rows; ++s)
            out_rows.push_back(spans[b].first + s);
    const std::int64_t n_out = static_cast<std::int64_t>(out_rows.size());
    std::vector<float> logits;

    // The chain's layers on the device; on a loss the host's states are as before the
    // step, so the CPU runs the whole step from the same embedded rows.
    int first_cpu = 0;
    if (chain_ && (!chain_prompts_only_ || R > 1)) {
        try {
            first_cpu = run_chain(spans, R, x, out_rows, logits);
        } catch (const vulkan::DeviceLost& e) {
            device_event_ = e.what();
            std::fprintf(stderr, "[vulkan] %s: finishing on the CPU from here on\n", e.what());
            chain_.reset();
            first_cpu = 0;
            logits.clear();
        } catch (const vulkan::OutOfBudget& e) {
            // This step's rows or sessions don't fit the device next to the weights.
            std::fprintf(stderr, "[vulkan] %s: this step runs on the CPU\n", e.what());
            first_cpu = 0;
            logits.clear();
        }
        t = std::chrono::steady_clock::now();
    }
    const int cpu_end = first_cpu < 0 ? 0 : c_.layers;
    if (chain_ && first_cpu == 0)  // a step the chain left to the CPU: the mirrors are stale
        for (const Span& sp : spans) sp.state->device_token = 0;

    for (int i = std::max(first_cpu, 0); i < cpu_end; ++i) {
        const model::LayerWeights& L = w_.layers[i];
        for (std::int64_t s = 0; s < R; ++s) rmsnorm(x.data() + s * D, L.attn_norm.data(), c_.eps, D, h.data() + s * D);
        lap(t, times_.convs_norms);
        attention(i, spans, R, h.data(), a.data());
        lap(t, times_.attention);
        for (const Span& sp : spans)
            short_conv(a.data() + sp.first * D, sp.rows, D, L.attn_conv.data(), c_.conv_kernel,
                       sp.state->layers[i].conv[2].data());
        for (std::int64_t j = 0; j < R * D; ++j) x[j] += a[j];
        for (std::int64_t s = 0; s < R; ++s) rmsnorm(x.data() + s * D, L.mlp_norm.data(), c_.eps, D, h.data() + s * D);
        lap(t, times_.convs_norms);
        if (c_.kinds[i].sparse) {
            moe(i, R, h.data(), a.data());
            t = std::chrono::steady_clock::now();  // moe() accounts for its own phases
        } else {
            mlp(i, R, h.data(), a.data());
            lap(t, times_.dense);
        }
        for (const Span& sp : spans)
            short_conv(a.data() + sp.first * D, sp.rows, D, L.mlp_conv.data(), c_.conv_kernel,
                       sp.state->layers[i].conv[3].data());
        for (std::int64_t j = 0; j < R * D; ++j) x[j] += a[j];
        lap(t, times_.convs_norms);
    }

    for (std::size_t b = 0; b < blocks.size(); ++b) {
        blocks[b].state->len += spans[b].rows;
        blocks[b].state->fed.insert(blocks[b].state->fed.end(), blocks[b].ids.begin(), blocks[b].ids.end());
        if (used_audio[b]) blocks[b].state->tainted = true;
    }
    // The final norm, ÷ mup and lm_head of those rows at once (unless the chain did it).
    if (first_cpu >= 0) {
        std::vector<float> y(static_cast<std::size_t>(n_out * D));
        const float inv_mup = static_cast<float>(1.0 / c_.mup);
        for (std::int64_t s = 0; s < n_out; ++s) {
            float* ys = y.data() + s * D;
            rmsnorm(x.data() + out_rows[s] * D, w_.final_norm.data(), c_.eps, D, ys);
            for (std::int64_t d = 0; d < D; ++d) ys[d] *= inv_mup;
        }
        logits.assign(static_cast<std::size_t>(n_out * U), 0.0f);
        mm(y.data(), n_out, w_.lm_head, logits.data());
    }
    lap(t, times_.head);
    if (cache_) cache_->end_step(static_cast<std::uint64_t>(R));
    std::vector<std::vector<float>> result(blocks.size());
    std::int64_t at = 0;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        const std::int64_t n = blocks[b].all_rows ? spans[b].rows : 1;
        result[b].assign(logits.begin() + at * U, logits.begin() + (at + n) * U);
        at += n;
    }
    return result;
}

}  // namespace inkling::forward
