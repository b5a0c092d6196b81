// The Inkling forward on the CPU: feeds a block of token ids (a whole prompt, a chunk of
// one, or a single decode token) through every layer, advancing a session's state, and
// returns logits over the unpadded vocabulary. The math is docs/model.md's (transformers'
// semantics). The layer sequence is
// written once (run_layers) over the backend interface of backend.h: the CPU backend, and
// the Vulkan chain for the layers it takes.
//
//   forward::Forward fw(model, pool);
//   auto state = forward::make_session(model.config, 4096);
//   auto logits = fw.step(state, prompt_ids, nullptr, false);  // last row's logits
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/thread_pool.h"
#include "engine/experts/expert_cache.h"
#include "engine/forward/backend.h"
#include "engine/forward/cpu_backend.h"
#include "engine/forward/host_experts.h"
#include "engine/forward/meter.h"
#include "engine/forward/session_state.h"
#include "engine/model/weights.h"

namespace inkling::vulkan {
class Chain;
}

namespace inkling::forward {

// DMel frames for the audio placeholders of a prompt: u8 [frames][mel_bins], consumed
// left to right by the placeholder positions across however many steps the prompt takes.
struct AudioCursor {
    std::span<const std::uint8_t> frames;
    std::int64_t next = 0;  // next frame to use
    std::int64_t frame_count(int mel_bins) const { return static_cast<std::int64_t>(frames.size()) / mel_bins; }
};

// One session's share of a batched step: `ids` at positions state->len onwards.
struct Block {
    SessionState* state = nullptr;
    std::span<const std::int32_t> ids;
    AudioCursor* audio = nullptr;  // frames for this block's audio placeholders, or none
    bool all_rows = false;         // logits for every row, else the last row only
};

class Forward {
public:
    // A converted model (model.experts set) reads its routed experts through `cache`; when
    // none is given the forward makes one of the default size (experts::default_cap), with
    // no usage file. Experts are computed in rounds of at most the cache's cap, in
    // increasing id, so every cap gives bitwise the same logits.
    Forward(const model::Model& model, cpu::ThreadPool& pool, std::shared_ptr<experts::ExpertCache> cache = nullptr);
    ~Forward();

    // Hands the dense part of the layers the chain takes to its Vulkan device (nullptr: the
    // CPU does everything). After a device loss the forward finishes the step on the CPU,
    // drops the chain and reports it through take_device_event().
    // `prompts_only`: steps whose blocks are all one row (decode, batched or not) stay on
    // the CPU; a step with a prompt chunk of two or more rows goes to the chain.
    void set_chain(std::unique_ptr<vulkan::Chain> chain, bool prompts_only = false);
    const vulkan::Chain* chain() const { return chain_.get(); }
    vulkan::Chain* chain() { return chain_.get(); }
    // What happened to the device since the last call ("" if nothing): the engine sends it
    // as an EVENT device_lost.
    std::string take_device_event();

    // Feeds `ids` at positions state.len … state.len+ids.size()-1 and records them.
    // Rows whose id is the audio token take the next frame of `audio` when one is given
    // (the state is then tainted). Returns [rows][unpadded_vocab] logits: one row per id
    // when `all_rows`, else the last row only. Throws std::runtime_error for ids outside
    // the vocabulary, audio without an audio tower, or a state that would overflow.
    std::vector<float> step(SessionState& state, std::span<const std::int32_t> ids, AudioCursor* audio,
                            bool all_rows);

    // Several sessions in one forward: every matrix is read once for all their rows (an
    // expert serves every row routed to it), while attention, convs and K/V stay per
    // session. Each row's result is bitwise what step() gives that session alone. All
    // blocks are checked before any state changes. Returns each block's logits.
    std::vector<std::vector<float>> step_batch(std::span<const Block> blocks);

    const model::Model& model() const { return model_; }
    // Bytes of weight matrices the steps so far have read (each matrix once per step): the
    // benchmark's bytes-per-token.
    std::uint64_t weight_bytes_read() const { return meter_.bytes(); }

    // Where the time of all steps so far went, in seconds.
    using PhaseTimes = forward::PhaseTimes;
    const PhaseTimes& phase_times() const { return meter_.times(); }
    // Rows routed to each expert so far: [layer][expert] (empty on dense layers).
    const std::vector<std::vector<std::uint64_t>>& expert_uses() const { return experts_.uses(); }
    // The expert cache of a converted model, else null.
    experts::ExpertCache* expert_cache() const { return experts_.cache(); }

private:
    void embed(std::span<const std::int32_t> ids, AudioCursor* audio, float* x, bool& used_audio);
    // The one layer sequence: layers [from, to) on `be` (backend.h).
    void run_layers(Backend& be, int from, int to, std::int64_t rows);
    // The chain's layers of a step; returns the first layer left to the CPU (x then holds
    // the residual rows), or -1 when the chain computed the logits too. Throws
    // vulkan::DeviceLost or vulkan::OutOfBudget with the host's states and `x` untouched.
    int run_chain(const std::vector<Span>& spans, std::int64_t rows, std::vector<float>& x,
                  const std::vector<std::int64_t>& out_rows, std::vector<float>& logits);

    const model::Model& model_;
    const model::Config& c_;
    const model::Weights& w_;
    Meter meter_;
    HostExperts experts_;
    CpuBackend cpu_;
    std::vector<float> h_, router_logits_;  // the MoE input and router logits, on the host
    std::unique_ptr<vulkan::Chain> chain_;
    bool chain_prompts_only_ = false;
    std::string device_event_;
};

// Depthwise causal short conv with the residual inside, over `rows` rows of `channels`:
// x[t][c] += Σ_j w[c][j]·col[t+j], col = (state_c, x[·][c]); the state keeps the last
// kernel-1 raw inputs.
void short_conv(float* x, std::int64_t rows, std::int64_t channels, const float* w, int kernel, float* state);

}  // namespace inkling::forward
