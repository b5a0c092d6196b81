// The device expert tier: routed experts held in device memory, per MoE layer a bank of
// slots (each one expert's gate, up and down, packed), next to the host's RAM cache and
// disk (docs/vulkan.md, "Routed experts on the device").
//
// Two ways a layer uses its bank:
// - resident: every expert of the layer has a slot, so the router's top-k runs on the
//   device too and the MoE block needs no host round trip (Chain::moe_resident);
// - tier: fewer slots than experts. The host routes; the layer's (row, expert) pairs split
//   into the device's hits and the host's misses, computed at the same time and joined in
//   the CPU's order (each row's pairs in increasing expert id). Which experts hold the
//   slots follows a usage history (decayed counts, as the RAM cache's pins): between
//   steps the hottest experts without a slot are uploaded — on a worker thread where the
//   device memory is host-mapped, never stalling a step — and replace the coldest ones.
//   A slot being filled is not used until its upload is done.
// - streamed: a tier layer's misses that a prompt chunk routes many rows to (at least
//   TierOptions::stream_rows) need not wait for the usage history: they are packed into a
//   host-visible staging buffer, copied to a small stream area of device slots by the
//   queue and computed there, in batches of stream_batch() experts, two batches in flight
//   (docs/vulkan.md, "Cold experts of a prompt chunk"). The slots' contents stay as they were.
//
// Experts in f32 or bf16 (a mapped checkpoint) run through moe_gemv.comp; a converted
// model's int8/int4 experts (read from experts.inkx) keep their container layout in the
// slots, values then scales, and run through qact.comp + moe_gemv_int.comp, the CPU integer
// kernels' arithmetic to the bit (docs/vulkan.md, "Quantized experts").
//
//   ExpertTier tier(ctx, ops, model, device_layers, budget_bytes, {});
//   tier.between_steps();                         // no frame in flight
//   if (tier.resident(i)) …  tier.record_pairs(frame, i, …);  tier.note_routes(i, experts);
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/experts/expert_store.h"
#include "engine/experts/usage_history.h"
#include "engine/model/weights.h"
#include "engine/vulkan/buffer.h"
#include "engine/vulkan/ops.h"

namespace inkling::vulkan {

struct TierOptions {
    int layers = -1;  // MoE layers with a bank, from the first: -1 every one the budget allows, 0 none
    int slots = 0;    // slots a layer, forced (tests): 0 every expert when all fit, else what the budget gives
    double half_life_tokens = 4096;  // the usage history's decay
    int uploads_per_step = 4;        // per layer, at most, started between two steps
    bool inline_uploads = false;     // tests: between steps on the calling thread, as without host-mapped memory
    // Streaming a prompt chunk's cold experts: misses of at least stream_rows rows (0: never)
    // go through stream_slots device slots (two halves, one batch each; taken off the
    // budget when it decides the slots, at most a quarter of it).
    std::uint32_t stream_rows = 8;
    int stream_slots = 16;
    // Fault hook (tests): the n-th upload fails as if the device were lost (0: never).
    std::uint64_t fault_upload_at = 0;
};

// Integer experts: each pair's activations quantized on the device (ExpertTier::act_row_bytes).
struct IntScratch {
    const Buffer* q = nullptr;       // [rows][act_row_bytes] int8
    const Buffer* scales = nullptr;  // [rows][act_row_bytes / 32] f32
};

class ExpertTier {
public:
    static constexpr std::uint32_t kNoSlot = 0xffffffffu;

    // Places banks for the MoE layers among the first `device_layers` within `budget`
    // bytes; a resident layer is filled at once, a tier layer starts from the usage
    // history's hottest experts (`history` may be null) and learns. Prints why experts
    // stay on the host when the model's experts can't be read by the shaders.
    ExpertTier(Context& ctx, const Ops& ops, const model::Model& model, int device_layers, std::uint64_t budget,
               const TierOptions& options, const experts::UsageHistory* history = nullptr);
    ~ExpertTier();
    ExpertTier(const ExpertTier&) = delete;
    ExpertTier& operator=(const ExpertTier&) = delete;

    bool has(int layer) const;       // a bank, any slots
    bool resident(int layer) const;  // every expert in a slot: routes on the device
    int layers_with_bank() const;
    int resident_layers() const;
    std::uint64_t bytes() const { return bytes_; }
    std::uint32_t slots(int layer) const;
    // The expert's slot now (kNoSlot: the host computes it).
    std::uint32_t slot_of(int layer, int expert) const;
    // The experts holding slots (increasing id), and the ones the usage history says should
    // (hottest first, at most the slot count).
    std::vector<int> experts_in_slots(int layer) const;
    std::vector<int> hottest(int layer) const;
    // The router's correction bias and route_scale × router scale of a banked layer.
    const Buffer& bias(int layer) const;
    float route_scale(int layer) const;

    // Integer experts (a converted model's int8/int4): the banks hold them as the container
    // does (values, then scales); the shaders quantize the activations into scratch of
    // act_row_bytes() bytes and act_row_bytes()/8 bytes of scales a row (pair).
    bool quantized() const;
    std::size_t act_row_bytes() const;  // 0 unless quantized
    const char* format() const;         // "f32", "bf16", "int8", "int4"; "" without a bank

    // Records the routed projections of the pairs whose expert has a slot: y[q] =
    // down(silu(gate(x)) ⊙ up(x)) with x = h[q / x_div]; others are left alone. `scratch`
    // holds `pairs` rows (quantized banks only).
    void record_pairs(Frame& f, int layer, std::uint32_t pairs, std::uint32_t x_div, const Buffer& h,
                      const Binding& route_e, const Buffer& pg, const Buffer& pu, const Buffer& py,
                      const IntScratch& scratch = {}) const;

    // The experts a step's pairs used (the usage history) and its tokens.
    void note_routes(int layer, std::span<const std::uint32_t> experts);
    void note_tokens(std::uint64_t tokens);
    // Between steps, no frame in flight: slots whose upload finished take their expert;
    // the hottest experts without a slot start uploading into free or colder slots.
    // Throws DeviceLost when an upload found the device lost.
    void between_steps();
    // Waits for uploads in flight (tests, and before the tier is dropped).
    void drain();

    // Streaming (a tier layer's misses with many rows in a step). stage() packs experts
    // (their weights from the host's RAM cache or the mapped checkpoint) into staging half
    // `half` on `pool`'s threads (null: the calling thread); record_stream() then records
    // the copies of that half to its device slots and the routed projections of the pairs
    // whose expert is in the batch, as record_pairs() does for the bank. A half may be
    // staged again once the frame that recorded it is done.
    std::uint32_t stream_batch() const;  // experts a batch; 0: no stream area
    int stream_halves() const;           // batches that may be in flight at once
    std::uint32_t stream_rows() const { return options_.stream_rows; }
    std::uint64_t stream_bytes() const;  // the stream area's device bytes
    // `weights[k]` is expert experts[k]'s, packed into slot first + k of the half.
    void stage(int half, std::uint32_t first, std::span<const int> experts,
               std::span<const model::Ffn* const> weights, cpu::ThreadPool* pool);
    // The batch: the experts staged into the half's slots 0, 1, … (their expert → slot table
    // written here).
    void record_stream(Frame& f, int layer, int half, std::span<const int> batch, std::uint32_t pairs,
                       std::uint32_t x_div, const Buffer& h,
                       const Binding& route_e, const Buffer& pg, const Buffer& pu, const Buffer& py,
                       const IntScratch& scratch = {}) const;

    struct Counters {
        std::uint64_t uploads = 0, evictions = 0;
        std::uint64_t upload_bytes = 0;
        std::uint64_t streamed = 0, stream_bytes = 0;  // experts staged for one step, and their bytes
    };
    Counters counters() const;

private:
    struct Bank;
    struct StreamArea;
    struct Job {
        int layer;
        std::uint32_t slot;
        int expert;
    };
    void upload(const Job& job);  // packs and writes one expert into its slot
    // Expert e of `layer`: mapped, or read from experts.inkx into record_ (valid until the next call).
    model::Ffn expert(int layer, int e);
    void worker();
    void write_slots(int layer);  // the bank's expert → slot table to the device

    Context& ctx_;
    const Ops& ops_;
    const model::Model& model_;
    const model::Config& c_;
    TierOptions options_;
    std::vector<std::unique_ptr<Bank>> banks_;  // per model layer (null: none)
    std::unique_ptr<StreamArea> stream_;        // null: no streaming
    std::uint64_t bytes_ = 0;
    experts::UsageHistory history_;
    std::vector<int> history_slot_;  // model layer → history row
    experts::AlignedBuffer record_;  // a converted model's record being uploaded

    bool threaded_ = false;  // every bank buffer host-mapped: uploads on the worker
    std::thread thread_;
    mutable std::mutex mutex_;
    std::condition_variable wake_, idle_;
    std::deque<Job> queue_;
    std::vector<Job> done_;
    std::string error_;  // an upload's DeviceLost, reported at the next between_steps()
    bool stop_ = false;
    int busy_ = 0;
    Counters counts_;
    std::atomic<std::uint64_t> attempts_{0};  // uploads started (the fault hook's count)
};

}  // namespace inkling::vulkan
