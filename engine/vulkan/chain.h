// The dense chain: the dense part of each layer as compute shaders on the Vulkan device,
// the routed experts on the host (the design of colibri's Vulkan chain, written anew;
// docs/vulkan.md).
//
// The chain is a forward::Backend (engine/forward/backend.h): the forward's one layer
// sequence drives it block by block, and it fuses the blocks into device frames.
//
// Per layer, frame A1 runs on the device: the MoE output of the layer before joins the
// residual (the host's routed sum plus each shared expert × its combine weight, then that
// layer's MLP short conv and the add), the input RMSNorm, q/k/v/r, the K and V short
// convs, the per-head q/k norms, the relative-bias attention over the device's mirror of
// the K/V cache, o_proj, the attention conv, the residual, the post-attention norm and —
// on a MoE layer — the router logits, which come back with the normed rows; a dense-MLP
// layer finishes its MLP in the same frame. The host then picks the experts and runs the
// routed ones while frame A2 (not waited for) runs the shared experts on the device.
// The last frame takes the final norm ÷ mup and lm_head of the rows whose logits are
// wanted.
//
// The host's state stays canonical: each step's K/V rows are copied into the host cache
// and the conv states back to the host at the end of every step. A session's device mirror
// is valid while SessionState::device_token holds the token the chain gave it; anything
// else that writes the state (a CPU step, a reset, a restored snapshot) clears the token,
// and the next chain step uploads the whole state first.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/forward/backend.h"
#include "engine/forward/session_state.h"
#include "engine/model/weights.h"
#include "engine/vulkan/buffer.h"
#include "engine/vulkan/context.h"
#include "engine/vulkan/frame.h"
#include "engine/vulkan/kernel.h"
#include "engine/vulkan/expert_tier.h"
#include "engine/vulkan/ops.h"

namespace inkling::vulkan {

// The chain can't take this model (a geometry or format the shaders don't read as the CPU
// does); the message says why.
struct Declined : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ChainOptions {
    int device = -1;            // -1: the best ranked
    std::uint64_t budget = 0;   // bytes; 0: the device's
    int layers = -1;            // layers on the device (from the first); -1: all that fit
    // K/V rows a global layer's mirror keeps (the KV split: older positions are attended on
    // the host). 0: the whole context, split only when a session's mirror doesn't fit.
    std::int64_t kv_window = 0;
    // MoE layers with routed experts on the device (the first ones the chain takes): -1
    // every one, within the budget left after the dense weights and a reserve for K/V
    // mirrors and scratch; 0 none. When every expert of those layers fits they are resident
    // (routing on the device too: no host round trip); else each layer gets the same share
    // of slots, filled with its hottest experts (vulkan/expert_tier.h).
    int expert_layers = -1;
    int expert_slots = 0;  // slots a layer, forced (tests); 0: from the budget
    bool inline_uploads = false;  // tests: the tier uploads between steps on the calling thread
    bool profile = false;         // time every command on the device (timestamps; benchmarks)
    // A step's frame is submitted (not waited for) once it holds this many dispatches, and
    // recording goes on into the next: the device runs the first layers while the host
    // records the rest. 0: one submit a step (as long as the host needs no result).
    std::uint32_t submit_dispatches = 64;
    // Projections of this many rows or more go through the tiled GEMM (Ops::gemm); 0: never.
    // 32 from the H200 (docs/performance.md): prompt chunks gain 1.5x, while 8-16 decode
    // rows (sessions) run slower through a 32-row tile than through the GEMV.
    std::uint32_t gemm_rows = 32;
    // A tier layer's misses with at least stream_rows rows in a step (prompt chunks) are
    // streamed to the device through staging buffers and computed there, stream_slots
    // experts on the device at a time (ExpertTier; 0: never). 8 from the H200
    // (docs/performance.md, "Cold experts of a prompt chunk").
    std::uint32_t stream_rows = 8;
    int stream_slots = 16;
    std::uint64_t fault_upload_at = 0;  // fault hook (tests): the tier's n-th expert upload is a lost device
    // The expert tier's first fill: each tier layer's hottest experts by this history (a
    // converted model's usage file, through its expert cache); read only while the chain is made.
    const experts::UsageHistory* history = nullptr;
    // Called after each layer's weights reach the device (done of total): load progress.
    std::function<void(std::uint64_t done, std::uint64_t total)> on_layer;
};

struct ChainStats {
    std::uint64_t frames = 0;  // submits
    std::uint64_t waits = 0;   // times the host waited for the device
    std::uint64_t steps = 0;  // steps the device ran to their end (not ones left to the CPU)
    std::uint64_t uploads = 0, split_layers = 0;
    std::uint64_t device_pairs = 0, host_pairs = 0;  // routed (row, expert) pairs computed on each side
    std::uint64_t stream_pairs = 0;  // of device_pairs, those of experts streamed for their step
    std::uint64_t dispatches = 0, barriers = 0;       // recorded into the frames
    double device_wait_s = 0;  // waiting for the device
    double host_s = 0;         // the rest of the chain's steps: recording, host experts, uploads
};

// The routed experts a resident layer picked on the device in the last step: one expert
// id per (row, k) pair, rows in batch order.
struct DeviceRoutes {
    int layer;
    std::vector<std::uint32_t> experts;
};

class Chain final : public forward::Backend {
public:
    using Span = forward::Span;
    // Opens the device and uploads the dense weights of the layers it takes. Throws
    // Unavailable (no device) or Declined.
    Chain(const model::Model& model, const ChainOptions& options);
    ~Chain() override;

    const DeviceInfo& device() const { return ctx_->info(); }
    int layers() const { return n_layers_; }     // layers 0..layers()-1 run here
    bool full() const;                            // every layer and lm_head here
    std::uint64_t memory_used() const { return ctx_->used(); }
    std::uint64_t memory_budget() const { return ctx_->budget(); }
    const ChainStats& stats() const { return stats_; }
    // MoE layers whose experts are all resident (routing on the device), layers with a
    // tier of slots, and the experts' device bytes.
    int resident_layers() const { return tier_ ? tier_->resident_layers() : 0; }
    int tier_layers() const { return tier_ ? tier_->layers_with_bank() : 0; }
    bool resident(int layer) const { return tier_ && tier_->resident(layer); }
    std::uint64_t expert_bytes() const { return tier_ ? tier_->bytes() : 0; }
    ExpertTier* tier() { return tier_.get(); }
    const ExpertTier* tier() const { return tier_.get(); }
    // Device time per kernel over all steps, when profiling.
    const Frame::Profile* profile() const { return options_.profile ? &profile_ : nullptr; }
    // What the resident layers routed in the last step (the host's usage counts).
    const std::vector<DeviceRoutes>& routes() const { return routes_; }

    // The backend's blocks (forward/backend.h). begin uploads x [R][D] (embedded on the
    // host). attention() opens layer i's frame A1 (the previous MoE layer's output joins
    // the residual first); router() and dense_mlp() finish and run it. moe() submits frame
    // A2 (the shared experts, not waited for) and computes the routed experts on the host
    // meanwhile; they join at the start of the next frame. head()/hand_off() end the step:
    // the last layer's MLP join, then the final norm ÷ mup and lm_head of `out_rows` (a
    // full chain) or the residual rows into x (a partial one), and the K/V rows and conv
    // states copied back to the host states, their mirrors marked current.
    void begin(std::span<const Span> spans, std::int64_t R, float* x) override;
    void attention(int layer) override;
    void dense_mlp(int layer) override;
    void router(int layer, float* h, float* logits) override;
    void moe(int layer, const forward::Routing& routing, const float* h, forward::HostExperts& host) override;
    bool moe_resident(int layer) override;
    bool has_head() const override { return full(); }
    void head(const std::vector<std::int64_t>& out_rows, float* logits) override;
    void hand_off(float* x) override;

    // Drops every mirror (after a device loss the chain is not used again).
    void forget_sessions();
    // The threads the host's share of a split layer runs on (none: the calling thread).
    void set_host_pool(cpu::ThreadPool* pool) { host_pool_ = pool; }

private:
    struct DeviceMatrix;
    struct LayerBuffers;
    struct Mirror;
    // y = m · x (with `up`: m · silu(x)·up, the MLP's down projection).
    void gemv(Frame& f, const DeviceMatrix& m, const Buffer& x, std::uint32_t x_off, std::uint32_t rows,
              const Buffer& y, std::uint32_t y_off, std::uint32_t y_stride, const Buffer* up = nullptr);
    void rmsnorm(Frame& f, const Buffer& x, std::uint32_t x_off, std::uint32_t segments, std::uint32_t n,
                 const Buffer& w, const Buffer& out, std::uint32_t out_off, float scale = 0.0f);
    // The short conv `which` (0 k, 1 v, 2 attention, 3 MLP) of `layer` over a span, its
    // state in the mirror's packed buffer.
    void sconv(Frame& f, const Buffer& x, std::uint32_t x_off, std::uint32_t rows, std::uint32_t channels,
               const Buffer& w, const Mirror& m, int layer, int which);
    // The rest of frame A1 after the MLP's output a_: its conv per span, barrier; the
    // residual add x += a is left pending for the next norm of x to fuse (norm_x) or the
    // step's end (apply_add).
    void mlp_conv_add(Frame& f, int i, bool join = false);  // join: a is the resident MoE join, still to compute
    // Conv `which` of `layer` over a, then x += a — on decode (every span one row) both left
    // pending for norm_x to fuse (conv_add_norm.comp), else the conv now and the add pending.
    void conv_add(Frame& f, int layer, int which, const Buffer& w, bool join = false);
    void record_conv(Frame& f, int layer, int which, const Buffer& w);  // each span's sconv, barrier
    void record_join(Frame& f);  // a = the resident layer's MoE join (moe_join.comp), barrier
    void norm_x(Frame& f, const Buffer& weight);  // h = rmsnorm(x (+= conv(a) / a if pending)), barrier
    void apply_add(Frame& f);                      // the pending conv and x += a on their own
    bool add_pending_ = false;
    struct PendingConv {
        int layer = -1, which = -1;
        const Buffer* weights = nullptr;
        bool join = false;  // the conv's input is the resident MoE join (py_, route_w_, shared_*)
    } conv_pending_;
    // Runs frame A1 (run_frame: submits and waits, counting the wait).
    void run_a1();
    void run_frame(Frame& f);
    void submit_frame(Frame& f);  // submits without waiting, counting its commands
    void wait_frame(Frame& f);    // waits for a submitted frame, counting the wait and its time
    // A tier layer's MoE block: the device's hits in frame A2, the host's misses
    // meanwhile; both join at the start of the next frame (join_moe).
    void moe_tier(int layer, const forward::Routing& routing, const float* h, forward::HostExperts& host);
    void shared_experts(Frame& f, int layer);  // into shared_out_: the two stages below, a barrier between
    void shared_gate_up(Frame& f, int layer);
    void shared_down(Frame& f, int layer);  // of silu(gate)·up
    void finish(const std::vector<std::int64_t>& out_rows, float* logits, float* x);
    void join_moe(Frame& f, int i);  // the previous MoE layer's output into the residual
    Mirror& mirror(forward::SessionState* s);
    std::unique_ptr<Mirror> make_mirror(const forward::SessionState& s, std::int64_t kv_window);
    void upload(Mirror& m, const forward::SessionState& s);
    void ensure_scratch(std::int64_t R);
    // The step scratch of n rows: its bytes, and per `mode` each buffer allocated or released.
    enum class Scratch { count, allocate, release };
    std::uint64_t scratch(std::int64_t n, Scratch mode, bool with_tier);

    const model::Model& model_;
    const model::Config& c_;
    ChainOptions options_;
    std::unique_ptr<Context> ctx_;
    std::unique_ptr<Ops> ops_;
    std::vector<std::unique_ptr<LayerBuffers>> layer_;
    std::unique_ptr<ExpertTier> tier_;  // routed experts on the device, if any
    std::vector<DeviceRoutes> routes_;
    std::unique_ptr<DeviceMatrix> lm_head_;
    std::unique_ptr<Buffer> final_norm_;
    int n_layers_ = 0;
    std::map<forward::SessionState*, std::unique_ptr<Mirror>> mirrors_;
    std::uint64_t next_token_ = 1;

    // Per-step scratch.
    std::int64_t scratch_rows_ = 0;
    std::int64_t kv_stride_ = 0;  // floats a layer takes in kv_down_ (K rows, then V rows)
    Buffer x_, h_, a_, q_, kf_, vf_, r_, ctx_rows_, tau_, g_, u_, shared_out_;
    Buffer sg_, su_;  // the shared experts' gate/up rows, a slice each
    Buffer attn_part_;            // the split attention's partials, a range of part_stride_ bytes a span
    std::size_t part_stride_ = 0, part_refused_ = 0;  // bytes a span; a size the budget refused
    Buffer routed_, shared_w_, logits_, h_down_, kv_down_, out_, q_down_, r_down_, host_part_;
    // Resident layers' scratch: router logits, pairs' gate/up/outputs, routes per layer
    // (host-visible, read back at the end of the step), pair and shared weights.
    Buffer route_logits_, pg_, pu_, py_, route_e_, route_w_, shared_wd_;
    Buffer route_e_dev_;  // resident layers' routes, written and read on the device
    Buffer y_host_;  // a tier layer's host pairs [R·K][D], copied into py_ before the join
    Buffer act_q_, act_s_;  // integer experts: each pair's activations quantized (IntScratch)
    std::vector<VkBufferCopy> host_pair_copies_;
    bool pending_tier_ = false;  // the pending MoE layer joins its pairs (moe_join)
    std::size_t tau_stride_ = 0, route_stride_ = 0;  // bytes between layers' slices
    std::vector<float> routed_host_;  // the host's routed sum of the pending MoE layer
    // Frame A1's ring (open_a1: a step's frames submitted as they fill) and frame A2.
    std::array<std::unique_ptr<Frame>, 4> a1_;
    std::size_t a1_at_ = 0, a1_early_ = 0;  // the current frame; this step's early submits
    Frame& a1() { return *a1_[a1_at_]; }
    Frame& open_a1();  // the current A1 frame, begun, or the next one once this is full
    std::unique_ptr<Frame> f2_;
    std::array<std::unique_ptr<Frame>, 2> stream_frames_;  // a tier layer's streamed batches, one a stream half
    Frame::Profile profile_;
    std::vector<Span> spans_;
    std::int64_t R_ = 0;
    int pending_moe_ = -1;  // a MoE layer whose output hasn't joined the residual
    std::chrono::steady_clock::time_point step_t0_;  // when this step began
    double step_wait_s_ = 0;                         // this step's waits on the device
    ChainStats stats_;
    cpu::ThreadPool* host_pool_ = nullptr;
};

}  // namespace inkling::vulkan
