#include "engine/vulkan/expert_tier.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "engine/experts/expert_store.h"
#include "engine/model/lane_order.h"
#include "engine/model/tensor.h"
#include "engine/quant/quantize.h"

namespace inkling::vulkan {
namespace {

std::uint32_t u32(std::int64_t v) { return static_cast<std::uint32_t>(v); }

// Why the shaders can't read the routed experts of layer L, or "". A converted model's
// (model.experts: int8 or int4 records of experts.inkx) need the integer shaders.
std::string experts_problem(const model::Model& model, const Ops& ops, const model::LayerWeights& L) {
    const model::Config& c = model.config;
    if (c.top_k > 16) return "top-k above 16";
    if (c.experts > 1024) return "more than 1024 experts a layer";
    if (model.experts) {
        const experts::RecordLayout& r = model.experts->layout();
        if (!ops.int_experts())
            return std::string("experts in ") + experts::format_name(r.format) +
                   " (the integer shaders need shaderFloat64, which this device lacks)";
        if (r.gate.group % quant::kBlock != 0 || r.down.group % quant::kBlock != 0)
            return "an integer expert group not a multiple of 32";
        return "";
    }
    if (L.experts.size() != static_cast<std::size_t>(c.experts)) return "experts not mapped";
    const model::DType dt = L.experts[0].gate.dtype;
    for (const auto& f : L.experts)
        for (const model::Matrix* m : {&f.gate, &f.up, &f.down}) {
            if (m->dtype != dt) return "experts of mixed dtypes";
            if (m->dtype != model::DType::F32 && m->dtype != model::DType::BF16)
                return std::string("experts in ") + model::dtype_name(m->dtype) + " (the shaders read F32 and BF16)";
            if (m->dtype == model::DType::BF16 && m->cols % 2 != 0) return "a BF16 expert of odd width";
        }
    return "";
}

// One expert matrix as a slot holds it: the rows packed (quantized: their values, then the
// scales [rows][groups]); a quantized slot is rounded up to 16 bytes, so every slot starts
// where the shader's 16-byte loads may read it.
std::size_t slot_bytes(const model::Matrix& m) {
    if (!model::is_quantized(m.dtype)) return m.bytes();
    return (m.bytes() + 15) / 16 * 16;
}

// Writes m as a slot holds it into dst (slot_bytes(m) bytes, the padding zeroed).
void pack_into(const model::Matrix& m, std::byte* dst) {
    const std::size_t total = slot_bytes(m);
    if (!model::is_quantized(m.dtype)) {
        const std::size_t row = model::dtype_bytes(m.dtype, m.cols);
        for (std::int64_t r = 0; r < m.rows; ++r) std::memcpy(dst + r * row, m.row(r), row);
        return;
    }
    const std::size_t row = model::dtype_bytes(m.dtype, m.row_stride), data = row * static_cast<std::size_t>(m.rows);
    const std::size_t scales = static_cast<std::size_t>(m.scale_stride) * 4;
    // In column order, which the shaders read, whatever order the CPU's kernels keep.
    for (std::int64_t r = 0; r < m.rows; ++r) model::copy_row_plain(m, r, dst + r * row, row);
    for (std::int64_t r = 0; r < m.rows; ++r) std::memcpy(dst + data + static_cast<std::size_t>(r) * scales, m.row_scales(r), scales);
    const std::size_t used = data + scales * static_cast<std::size_t>(m.rows);
    std::memset(dst + used, 0, total - used);
}

void pack(const model::Matrix& m, std::vector<std::byte>& out) {
    out.resize(slot_bytes(m));
    pack_into(m, out.data());
}

// The integer shader's view of one quantized matrix (its row geometry; slot_words the slot).
MoeIntPush int_push(const model::Matrix& m) {
    MoeIntPush p{};
    p.O = u32(m.rows);
    p.blocks = u32(m.row_stride / quant::kBlock);
    p.groups = u32(m.scale_stride);
    p.gblocks = u32(m.group / quant::kBlock);
    p.slot_words = u32(static_cast<std::int64_t>(slot_bytes(m) / 4));
    return p;
}

// The routed projections of the pairs whose expert the slot table places in `chunks`
// (a bank's, or a stream half's): y[q] = down(silu(gate(x)) ⊙ up(x)), x = h[q / x_div].
template <class BankT, class Chunks>
void record_ffn(const Ops& ops, Frame& f, const BankT& b, const Chunks& chunks, const Buffer& table,
                std::uint32_t pairs, std::uint32_t x_div, const Buffer& h, const Binding& route_e, const Buffer& pg,
                const Buffer& pu, const Buffer& py, const IntScratch& scratch) {
    const std::uint32_t I = u32(b.inter), D = u32(b.hidden);
    if (model::is_quantized(b.dtype)) {
        // The activations quantized on the device as the CPU's kernels quantize theirs, then
        // the integer products (moe_gemv_int.comp): h's rows for gate and up, each pair's
        // SwiGLU row for down (computed inside its quantization).
        const bool q4 = b.dtype == model::DType::Q4;
        const Buffer &xq = *scratch.q, &xs = *scratch.scales;
        ops.qact(f, {pairs / x_div, D, b.gate_int.blocks, 0, D}, h, xq, xs);
        f.barrier();
        for (const auto& ch : chunks) {
            MoeIntPush p = b.gate_int;
            p.pairs = pairs, p.x_div = x_div, p.s_first = ch.first, p.s_count = ch.count;
            ops.moe_gemv_int(f, q4, p, *ch.gate, xq, xs, pg, route_e, table);
            ops.moe_gemv_int(f, q4, p, *ch.up, xq, xs, pu, route_e, table);
        }
        f.barrier();
        ops.qact(f, {pairs, I, b.down_int.blocks, 0, I}, pg, xq, xs, &pu);  // of silu(gate)·up
        f.barrier();
        for (const auto& ch : chunks) {
            MoeIntPush p = b.down_int;
            p.pairs = pairs, p.x_div = 1, p.s_first = ch.first, p.s_count = ch.count;
            ops.moe_gemv_int(f, q4, p, *ch.down, xq, xs, py, route_e, table);
        }
        return;
    }
    for (const auto& ch : chunks) {
        ops.moe_gemv(f, b.bf16, {I, D, pairs, x_div, ch.first, ch.count}, *ch.gate, h, pg, route_e, table);
        ops.moe_gemv(f, b.bf16, {I, D, pairs, x_div, ch.first, ch.count}, *ch.up, h, pu, route_e, table);
    }
    f.barrier();
    // Down of silu(gate)·up: more pairs than one token's take the SwiGLU apart.
    const bool apart = ops.swiglu_apart(f, pg, pu, pairs * I, pairs > x_div);
    for (const auto& ch : chunks)
        ops.moe_gemv(f, b.bf16, {D, I, pairs, 1, ch.first, ch.count}, *ch.down, pg, py, route_e, table,
                     apart ? nullptr : &pu);
}

}  // namespace

struct ExpertTier::Bank {
    model::DType dtype = model::DType::F32;  // F32, BF16, I8 or Q4
    bool bf16 = false;
    MoeIntPush gate_int{}, down_int{};       // I8/Q4: the matrices' geometry for moe_gemv_int
    std::int64_t inter = 0, hidden = 0;
    std::uint64_t gate_bytes = 0, down_bytes = 0;  // one slot's matrix (gate and up alike)
    struct Chunk {
        std::unique_ptr<Buffer> gate, up, down;
        std::uint32_t first = 0, count = 0;  // slots
    };
    std::vector<Chunk> chunks;
    std::uint32_t per_chunk = 1, capacity = 0;
    std::unique_ptr<Buffer> slot_table, bias;
    float scale = 1.0f;
    std::vector<std::uint32_t> slot_of;  // expert → slot
    std::vector<int> expert_in;          // slot → expert (-1: free)
    std::vector<char> loading;           // slot → an upload in flight
    bool resident() const { return capacity == slot_of.size(); }
};

// The stream area: per half, device slots for one batch of experts, the staging buffer
// the host packs them into (the slots' layout: gate, up, down one after another a slot)
// and the batch's expert → slot table.
struct ExpertTier::StreamArea {
    std::uint32_t batch = 0;  // slots a half
    std::uint64_t slot_bytes = 0, gate_bytes = 0, down_bytes = 0;
    struct Half {
        Bank::Chunk slots;
        std::unique_ptr<Buffer> staging, table;
    };
    std::vector<Half> halves;
};

ExpertTier::ExpertTier(Context& ctx, const Ops& ops, const model::Model& model, int device_layers,
                       std::uint64_t budget, const TierOptions& o, const experts::UsageHistory* history)
    : ctx_(ctx), ops_(ops), model_(model), c_(model.config), options_(o) {
    banks_.resize(static_cast<std::size_t>(c_.layers));
    if (o.layers == 0) return;
    std::vector<int> sparse;
    for (int i = 0; i < device_layers; ++i)
        if (c_.kinds[i].sparse) sparse.push_back(i);
    if (o.layers > 0 && static_cast<int>(sparse.size()) > o.layers) sparse.resize(static_cast<std::size_t>(o.layers));
    if (sparse.empty()) return;
    const auto& w = model.weights;
    for (int i : sparse) {
        const std::string why = experts_problem(model, ops, w.layers[i]);
        if (!why.empty()) {
            std::fprintf(stderr, "[vulkan] routed experts stay on the host: %s\n", why.c_str());
            return;
        }
    }
    // One expert's matrices, for their geometry (every expert of every layer has the same).
    if (model.experts) record_ = experts::aligned_buffer(static_cast<std::size_t>(model.experts->record_bytes()));
    const model::Ffn f0 = expert(sparse[0], 0);
    const std::uint64_t per = slot_bytes(f0.gate) + slot_bytes(f0.up) + slot_bytes(f0.down);
    const std::uint64_t E = static_cast<std::uint64_t>(c_.experts);
    // Every expert if the budget holds them all, else the same share of slots a layer.
    std::uint64_t slots = o.slots > 0 ? std::min<std::uint64_t>(static_cast<std::uint64_t>(o.slots), E)
                                      : std::min<std::uint64_t>(E, budget / (per * sparse.size()));
    // Not every expert fits: a stream area for a prompt chunk's cold experts, off the budget
    // (at most a quarter of it) unless the slots were forced.
    std::uint64_t stream = 0;
    if (slots < E && o.stream_rows > 0 && o.stream_slots > 0) {
        stream = std::min<std::uint64_t>(static_cast<std::uint64_t>(o.stream_slots), E);
        if (o.slots <= 0) {
            stream = std::min(stream, budget / 4 / per);
            slots = std::min<std::uint64_t>(E, (budget - stream * per) / (per * sparse.size()));
        }
    }
    if (slots == 0) {
        std::fprintf(stderr, "[vulkan] routed experts stay on the host: %.1f MiB left holds no expert a layer\n",
                     static_cast<double>(budget) / 1048576.0);
        return;
    }
    history_ = experts::UsageHistory(sparse, c_.experts, o.half_life_tokens);
    history_slot_.assign(static_cast<std::size_t>(c_.layers), -1);
    for (std::size_t s = 0; s < sparse.size(); ++s) history_slot_[sparse[s]] = static_cast<int>(s);
    const std::uint64_t range = std::min<std::uint64_t>(ctx.info().max_storage_range, 1ull << 30);
    threaded_ = !o.inline_uploads;
    for (int i : sparse) {
        const auto& L = w.layers[i];
        auto b = std::make_unique<Bank>();
        b->dtype = f0.gate.dtype;
        b->bf16 = b->dtype == model::DType::BF16;
        if (model::is_quantized(b->dtype)) {
            b->gate_int = int_push(f0.gate);
            b->down_int = int_push(f0.down);
        }
        b->inter = f0.gate.rows;
        b->hidden = f0.gate.cols;
        b->gate_bytes = slot_bytes(f0.gate);
        b->down_bytes = slot_bytes(f0.down);
        b->capacity = u32(static_cast<std::int64_t>(slots));
        b->per_chunk = u32(static_cast<std::int64_t>(std::max<std::uint64_t>(1, range / std::max(b->gate_bytes, b->down_bytes))));
        for (std::uint32_t first = 0; first < b->capacity; first += b->per_chunk) {
            Bank::Chunk ch;
            ch.first = first;
            ch.count = std::min(b->per_chunk, b->capacity - first);
            ch.gate = std::make_unique<Buffer>(ctx, b->gate_bytes * ch.count, Buffer::Kind::Device);
            ch.up = std::make_unique<Buffer>(ctx, b->gate_bytes * ch.count, Buffer::Kind::Device);
            ch.down = std::make_unique<Buffer>(ctx, b->down_bytes * ch.count, Buffer::Kind::Device);
            threaded_ = threaded_ && ch.gate->mapped() && ch.up->mapped() && ch.down->mapped();
            b->chunks.push_back(std::move(ch));
        }
        b->slot_of.assign(static_cast<std::size_t>(E), kNoSlot);
        b->expert_in.assign(b->capacity, -1);
        b->loading.assign(b->capacity, 0);
        b->slot_table = std::make_unique<Buffer>(ctx, static_cast<std::size_t>(E) * 4, Buffer::Kind::Device);
        b->bias = std::make_unique<Buffer>(ctx, std::max<std::size_t>(4, L.router_bias.size() * 4), Buffer::Kind::Device);
        b->bias->write(L.router_bias.data(), L.router_bias.size() * 4);
        b->scale = static_cast<float>(c_.route_scale) * L.router_scale;
        bytes_ += per * b->capacity;
        banks_[i] = std::move(b);
    }
    // The first fill, before any step: every expert of a resident layer; the history's
    // hottest of a tier layer (a converted model's usage file), else none yet.
    for (int i : sparse) {
        Bank& b = *banks_[i];
        std::vector<int> first;
        if (b.resident()) {
            for (int e = 0; e < c_.experts; ++e) first.push_back(e);
        } else if (history) {
            const auto& hl = history->layers();
            const auto at = std::find(hl.begin(), hl.end(), i);
            if (at != hl.end() && history->experts() == c_.experts)
                first = history->top(static_cast<int>(at - hl.begin()), static_cast<int>(b.capacity));
        }
        for (std::size_t s = 0; s < first.size(); ++s) {
            upload({i, u32(static_cast<std::int64_t>(s)), first[s]});
            b.expert_in[s] = first[s];
            b.slot_of[first[s]] = u32(static_cast<std::int64_t>(s));
        }
        write_slots(i);
    }
    if (stream > 0) {
        // Two halves when there are two slots or more: a batch is staged while the one
        // before is copied and computed.
        auto a = std::make_unique<StreamArea>();
        const int halves = stream >= 2 ? 2 : 1;
        const Bank& b0 = *banks_[sparse[0]];
        a->batch = u32(static_cast<std::int64_t>(std::min<std::uint64_t>(stream / halves, b0.per_chunk)));
        a->gate_bytes = b0.gate_bytes;
        a->down_bytes = b0.down_bytes;
        a->slot_bytes = 2 * b0.gate_bytes + b0.down_bytes;
        for (int k = 0; k < halves; ++k) {
            StreamArea::Half half;
            half.slots.first = 0;
            half.slots.count = a->batch;
            half.slots.gate = std::make_unique<Buffer>(ctx, b0.gate_bytes * a->batch, Buffer::Kind::Device);
            half.slots.up = std::make_unique<Buffer>(ctx, b0.gate_bytes * a->batch, Buffer::Kind::Device);
            half.slots.down = std::make_unique<Buffer>(ctx, b0.down_bytes * a->batch, Buffer::Kind::Device);
            half.staging = std::make_unique<Buffer>(ctx, a->slot_bytes * a->batch, Buffer::Kind::Host);
            half.table = std::make_unique<Buffer>(ctx, static_cast<std::size_t>(E) * 4, Buffer::Kind::Host);
            a->halves.push_back(std::move(half));
        }
        stream_ = std::move(a);
    }
    counts_ = {};
    if (threaded_) thread_ = std::thread([this] { worker(); });
}

ExpertTier::~ExpertTier() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool ExpertTier::has(int layer) const {
    return layer >= 0 && layer < static_cast<int>(banks_.size()) && banks_[layer] != nullptr;
}
bool ExpertTier::resident(int layer) const { return has(layer) && banks_[layer]->resident(); }
int ExpertTier::layers_with_bank() const {
    int n = 0;
    for (const auto& b : banks_) n += b != nullptr;
    return n;
}
int ExpertTier::resident_layers() const {
    int n = 0;
    for (const auto& b : banks_) n += b && b->resident();
    return n;
}
std::uint32_t ExpertTier::slots(int layer) const { return has(layer) ? banks_[layer]->capacity : 0; }
std::uint32_t ExpertTier::slot_of(int layer, int expert) const {
    return has(layer) ? banks_[layer]->slot_of[static_cast<std::size_t>(expert)] : kNoSlot;
}
std::vector<int> ExpertTier::experts_in_slots(int layer) const {
    std::vector<int> out;
    if (!has(layer)) return out;
    for (std::size_t e = 0; e < banks_[layer]->slot_of.size(); ++e)
        if (banks_[layer]->slot_of[e] != kNoSlot) out.push_back(static_cast<int>(e));
    return out;
}

std::vector<int> ExpertTier::hottest(int layer) const {
    if (!has(layer)) return {};
    return history_.top(history_slot_[layer], static_cast<int>(banks_[layer]->capacity));
}

const Buffer& ExpertTier::bias(int layer) const { return *banks_[layer]->bias; }
float ExpertTier::route_scale(int layer) const { return banks_[layer]->scale; }

model::Ffn ExpertTier::expert(int layer, int e) {
    if (!model_.experts) return model_.weights.layers[layer].experts[static_cast<std::size_t>(e)];
    model_.experts->read(layer, e, record_.get());  // thread-safe; one uploader at a time uses record_
    return model_.experts->view(record_.get());
}

bool ExpertTier::quantized() const {
    for (const auto& b : banks_)
        if (b) return model::is_quantized(b->dtype);
    return false;
}

std::size_t ExpertTier::act_row_bytes() const {
    for (const auto& b : banks_)
        if (b && model::is_quantized(b->dtype)) return 32u * std::max(b->gate_int.blocks, b->down_int.blocks);
    return 0;
}

const char* ExpertTier::format() const {
    for (const auto& b : banks_)
        if (b) return b->dtype == model::DType::I8 ? "int8" : b->dtype == model::DType::Q4 ? "int4" : model::dtype_name(b->dtype);
    return "";
}

void ExpertTier::record_pairs(Frame& f, int layer, std::uint32_t pairs, std::uint32_t x_div, const Buffer& h,
                              const Binding& route_e, const Buffer& pg, const Buffer& pu, const Buffer& py,
                              const IntScratch& scratch) const {
    const Bank& b = *banks_[layer];
    record_ffn(ops_, f, b, b.chunks, *b.slot_table, pairs, x_div, h, route_e, pg, pu, py, scratch);
}

std::uint32_t ExpertTier::stream_batch() const { return stream_ ? stream_->batch : 0; }
int ExpertTier::stream_halves() const { return stream_ ? static_cast<int>(stream_->halves.size()) : 0; }
std::uint64_t ExpertTier::stream_bytes() const {
    return stream_ ? stream_->slot_bytes * stream_->batch * stream_->halves.size() : 0;
}

void ExpertTier::stage(int half, std::uint32_t first, std::span<const int> experts,
                       std::span<const model::Ffn* const> weights, cpu::ThreadPool* pool) {
    StreamArea& a = *stream_;
    StreamArea::Half& hf = a.halves[static_cast<std::size_t>(half)];
    if (first + experts.size() > a.batch || weights.size() != experts.size())
        throw std::logic_error("ExpertTier::stage: more experts than a stream half holds");
    auto* staging = static_cast<std::byte*>(hf.staging->data());
    const auto n = static_cast<std::int64_t>(experts.size());
    auto pack_range = [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t k = lo; k < hi; ++k) {
            const model::Ffn& f = *weights[static_cast<std::size_t>(k)];
            std::byte* at = staging + (first + static_cast<std::size_t>(k)) * a.slot_bytes;
            pack_into(f.gate, at);
            pack_into(f.up, at + a.gate_bytes);
            pack_into(f.down, at + 2 * a.gate_bytes);
        }
    };
    if (pool && n > 1) pool->parallel_for(n, pack_range);
    else pack_range(0, n);
    std::lock_guard lock(mutex_);
    counts_.streamed += static_cast<std::uint64_t>(n);
    counts_.stream_bytes += static_cast<std::uint64_t>(n) * a.slot_bytes;
}

void ExpertTier::record_stream(Frame& f, int layer, int half, std::span<const int> batch, std::uint32_t pairs,
                               std::uint32_t x_div, const Buffer& h, const Binding& route_e, const Buffer& pg,
                               const Buffer& pu, const Buffer& py, const IntScratch& scratch) const {
    const StreamArea& a = *stream_;
    const StreamArea::Half& hf = a.halves[static_cast<std::size_t>(half)];
    if (batch.size() > a.batch) throw std::logic_error("ExpertTier::record_stream: more experts than a stream half holds");
    hf.staging->flush();
    std::vector<std::uint32_t> table(static_cast<std::size_t>(c_.experts), kNoSlot);
    std::vector<VkBufferCopy> gate, up, down;
    for (std::size_t k = 0; k < batch.size(); ++k) {
        table[static_cast<std::size_t>(batch[k])] = u32(static_cast<std::int64_t>(k));
        const VkDeviceSize at = k * a.slot_bytes;
        gate.push_back({at, k * a.gate_bytes, a.gate_bytes});
        up.push_back({at + a.gate_bytes, k * a.gate_bytes, a.gate_bytes});
        down.push_back({at + 2 * a.gate_bytes, k * a.down_bytes, a.down_bytes});
    }
    hf.table->write(table.data(), table.size() * 4);
    f.copy_regions(*hf.staging, *hf.slots.gate, gate);
    f.copy_regions(*hf.staging, *hf.slots.up, up);
    f.copy_regions(*hf.staging, *hf.slots.down, down);
    f.barrier();
    const Bank& b = *banks_[layer];
    record_ffn(ops_, f, b, std::span(&hf.slots, 1), *hf.table, pairs, x_div, h, route_e, pg, pu, py, scratch);
}

void ExpertTier::upload(const Job& j) {
    if (options_.fault_upload_at && ++attempts_ == options_.fault_upload_at)
        throw DeviceLost("an expert upload (fault hook)");
    Bank& b = *banks_[j.layer];
    const model::Ffn f = expert(j.layer, j.expert);
    Bank::Chunk& ch = b.chunks[j.slot / b.per_chunk];
    const std::size_t local = j.slot - ch.first;
    std::vector<std::byte> packed;
    pack(f.gate, packed);
    ch.gate->write(packed.data(), packed.size(), local * b.gate_bytes);
    pack(f.up, packed);
    ch.up->write(packed.data(), packed.size(), local * b.gate_bytes);
    pack(f.down, packed);
    ch.down->write(packed.data(), packed.size(), local * b.down_bytes);
    std::lock_guard lock(mutex_);
    ++counts_.uploads;
    counts_.upload_bytes += 2 * b.gate_bytes + b.down_bytes;
}

void ExpertTier::worker() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        const Job job = queue_.front();
        queue_.pop_front();
        ++busy_;
        lock.unlock();
        std::string failed;
        try {
            upload(job);  // memcpy into host-mapped device memory: no queue, no allocation
        } catch (const std::exception& e) {
            failed = e.what();
        }
        lock.lock();
        --busy_;
        if (!failed.empty() && error_.empty()) error_ = failed;
        done_.push_back(job);
        idle_.notify_all();
    }
}

void ExpertTier::write_slots(int layer) {
    const Bank& b = *banks_[layer];
    b.slot_table->write(b.slot_of.data(), b.slot_of.size() * 4);
}

void ExpertTier::note_routes(int layer, std::span<const std::uint32_t> experts) {
    if (!has(layer)) return;
    const int row = history_slot_[layer];
    for (std::uint32_t e : experts)
        if (e < static_cast<std::uint32_t>(c_.experts)) history_.add(row, static_cast<int>(e), 1.0);
}

void ExpertTier::note_tokens(std::uint64_t tokens) {
    if (layers_with_bank() > 0) history_.add_tokens(tokens);
}

void ExpertTier::between_steps() {
    std::vector<Job> finished;
    {
        std::lock_guard lock(mutex_);
        if (!error_.empty()) throw DeviceLost("an expert upload: " + error_);
        finished.swap(done_);
    }
    std::vector<char> changed(banks_.size(), 0);
    for (const Job& j : finished) {
        Bank& b = *banks_[j.layer];
        b.loading[j.slot] = 0;
        b.expert_in[j.slot] = j.expert;
        b.slot_of[static_cast<std::size_t>(j.expert)] = j.slot;
        changed[j.layer] = 1;
    }
    std::vector<Job> start;
    for (std::size_t i = 0; i < banks_.size(); ++i) {
        if (!banks_[i] || banks_[i]->resident()) continue;
        Bank& b = *banks_[i];
        const int row = history_slot_[i];
        // The experts that should hold the slots, hottest first.
        const std::vector<int> want = history_.top(row, static_cast<int>(b.capacity));
        std::vector<char> wanted(static_cast<std::size_t>(c_.experts), 0);
        for (int e : want) wanted[e] = 1;
        int started = 0;
        for (int e : want) {
            if (started >= options_.uploads_per_step) break;
            if (b.slot_of[e] != kNoSlot) continue;
            bool on_its_way = false;
            for (std::uint32_t s = 0; s < b.capacity; ++s) on_its_way = on_its_way || (b.loading[s] && b.expert_in[s] == e);
            if (on_its_way) continue;
            // A free slot, else the coldest one whose expert is no longer wanted.
            std::uint32_t slot = kNoSlot;
            for (std::uint32_t s = 0; s < b.capacity && slot == kNoSlot; ++s)
                if (!b.loading[s] && b.expert_in[s] < 0) slot = s;
            if (slot == kNoSlot) {
                double coldest = 0;
                for (std::uint32_t s = 0; s < b.capacity; ++s) {
                    const int x = b.expert_in[s];
                    if (b.loading[s] || x < 0 || wanted[x]) continue;
                    const double cnt = history_.count(row, x);
                    if (slot == kNoSlot || cnt < coldest) slot = s, coldest = cnt;
                }
            }
            if (slot == kNoSlot) break;
            if (const int old = b.expert_in[slot]; old >= 0) {
                b.slot_of[static_cast<std::size_t>(old)] = kNoSlot;  // no frame reads it from now on
                std::lock_guard lock(mutex_);
                ++counts_.evictions;
            }
            b.expert_in[slot] = e;  // the expert on its way (slot_of is set once it is there)
            b.loading[slot] = 1;
            start.push_back({static_cast<int>(i), slot, e});
            changed[i] = 1;
            ++started;
        }
    }
    for (std::size_t i = 0; i < banks_.size(); ++i)
        if (changed[i]) write_slots(static_cast<int>(i));
    if (start.empty()) return;
    if (threaded_) {
        {
            std::lock_guard lock(mutex_);
            queue_.insert(queue_.end(), start.begin(), start.end());
        }
        wake_.notify_all();
        return;
    }
    // Device memory the host can't map: the uploads go through staging copies on the
    // queue, between steps, a few a layer each time.
    for (const Job& j : start) upload(j);
    std::lock_guard lock(mutex_);
    done_.insert(done_.end(), start.begin(), start.end());
}

void ExpertTier::drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && busy_ == 0; });
}

ExpertTier::Counters ExpertTier::counters() const {
    std::lock_guard lock(mutex_);
    return counts_;
}

}  // namespace inkling::vulkan
