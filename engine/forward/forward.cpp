#include "engine/forward/forward.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/cpu/kernels.h"
#include "engine/vulkan/chain.h"

namespace inkling::forward {

using cpu::rmsnorm;

namespace {
constexpr double kAudioEps = 1e-6;  // the audio tower's norm: a literal, not rms_norm_eps
}  // namespace

Forward::Forward(const model::Model& model, cpu::ThreadPool& pool, std::shared_ptr<experts::ExpertCache> cache)
    : model_(model),
      c_(model.config),
      w_(model.weights),
      meter_(pool),
      experts_(model, meter_, std::move(cache)),
      cpu_(model, meter_) {}

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

std::vector<float> Forward::step(SessionState& state, std::span<const std::int32_t> ids, AudioCursor* audio,
                                 bool all_rows) {
    if (ids.empty()) return {};
    Block block{&state, ids, audio, all_rows};
    return std::move(step_batch(std::span(&block, 1))[0]);
}

void Forward::run_layers(Backend& be, int from, int to, std::int64_t R) {
    const std::int64_t D = c_.hidden, E = c_.experts, NS = c_.shared_experts;
    auto& layer_s = meter_.times().layers;
    layer_s.resize(static_cast<std::size_t>(c_.layers));
    const bool timed = &be == &cpu_;  // the chain's layers end on the device, not here
    auto t = Meter::Clock::now();
    for (int i = from; i < to; ++i) {
        be.attention(i);
        if (!c_.kinds[i].sparse) {
            be.dense_mlp(i);
        } else if (!be.moe_resident(i)) {
            h_.resize(static_cast<std::size_t>(R * D));
            router_logits_.resize(static_cast<std::size_t>(R * (E + NS)));
            be.router(i, h_.data(), router_logits_.data());
            const Routing routing = experts_.route(i, R, router_logits_.data(), h_.data());
            be.moe(i, routing, h_.data(), experts_);
        }
        if (timed) Meter::lap(t, layer_s[static_cast<std::size_t>(i)]);
    }
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
    auto t = Meter::Clock::now();
    std::vector<float> x(static_cast<std::size_t>(R * D));
    std::vector<char> used_audio(blocks.size(), 0);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        bool used = false;
        embed(blocks[b].ids, blocks[b].audio, x.data() + spans[b].first * D, used);
        used_audio[b] = used;
    }
    Meter::lap(t, meter_.times().embed);

    // The rows whose logits are wanted.
    std::vector<std::int64_t> out_rows;
    for (std::size_t b = 0; b < blocks.size(); ++b)
        for (std::int64_t s = blocks[b].all_rows ? 0 : spans[b].rows - 1; s < spans[b].rows; ++s)
            out_rows.push_back(spans[b].first + s);
    std::vector<float> logits;

    // The chain's layers on the device; on a loss the host's states are as before the
    // step, so the CPU runs the whole step from the same embedded rows.
    // --vulkan prompts: a step with a prompt chunk in it goes to the chain; one of decode rows
    // only (one token a session, however many sessions) stays on the CPU.
    const bool has_prompt = std::any_of(spans.begin(), spans.end(), [](const Span& s) { return s.rows > 1; });
    int first_cpu = 0;
    if (chain_ && (!chain_prompts_only_ || has_prompt)) {
        try {
            first_cpu = run_chain(spans, R, x, out_rows, logits);
        } catch (const vulkan::DeviceLost& e) {
            device_event_ = e.what();
            std::fprintf(stderr, "[vulkan] %s: finishing on the CPU from here on\n", e.what());
            chain_.reset();
            first_cpu = 0;
        } catch (const vulkan::OutOfBudget& e) {
            // This step's rows or sessions don't fit the device next to the weights.
            std::fprintf(stderr, "[vulkan] %s: this step runs on the CPU\n", e.what());
            first_cpu = 0;
        }
    }
    if (chain_ && first_cpu == 0)  // a step the chain left to the CPU: the mirrors are stale
        for (const Span& sp : spans) sp.state->device_token = 0;

    if (first_cpu >= 0) {
        cpu_.begin(spans, R, x.data());
        run_layers(cpu_, first_cpu, c_.layers, R);
        logits.assign(out_rows.size() * static_cast<std::size_t>(U), 0.0f);
        cpu_.head(out_rows, logits.data());
    }
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        blocks[b].state->len += spans[b].rows;
        blocks[b].state->fed.insert(blocks[b].state->fed.end(), blocks[b].ids.begin(), blocks[b].ids.end());
        if (used_audio[b]) blocks[b].state->tainted = true;
    }
    if (auto* cache = experts_.cache()) cache->end_step(static_cast<std::uint64_t>(R));
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
