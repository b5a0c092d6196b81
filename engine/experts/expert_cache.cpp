#include "engine/experts/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "platform/file_io.h"
#include "platform/memory.h"

namespace inkling::experts {

using Clock = std::chrono::steady_clock;

ExpertCache::Lease& ExpertCache::Lease::operator=(Lease&& o) noexcept {
    if (this != &o) {
        release();
        cache_ = o.cache_;
        layer_ = o.layer_;
        slots_ = std::move(o.slots_);
        ffn_ = std::move(o.ffn_);
        o.cache_ = nullptr;
    }
    return *this;
}

void ExpertCache::Lease::release() {
    if (cache_) cache_->release(*this);
    cache_ = nullptr;
    slots_.clear();
    ffn_.clear();
}

ExpertCache::ExpertCache(std::shared_ptr<ExpertStore> store, const CacheOptions& options)
    : store_(std::move(store)), options_(options) {
    const auto& h = store_->header();
    const int E = static_cast<int>(h.experts);
    cap_ = options.cap <= 0 ? E : std::min(options.cap, E);
    pins_ = options.pins < 0 ? cap_ / 2 : std::min(options.pins, cap_ - 1);
    std::string warning;
    history_ = options.usage_file.empty() ? UsageHistory(h.layers, E)
                                          : UsageHistory::load(options.usage_file, h.layers, E, warning);
    if (!warning.empty()) std::fprintf(stderr, "[experts] warning: %s\n", warning.c_str());

    const auto rb = static_cast<std::size_t>(store_->record_bytes());
    for (std::size_t s = 0; s < h.layers.size(); ++s) {
        Layer l;
        l.model_layer = h.layers[s];
        l.slab = aligned_buffer(rb * static_cast<std::size_t>(cap_));
        platform::advise_huge_pages(l.slab.get(), rb * static_cast<std::size_t>(cap_));
        l.slots.resize(static_cast<std::size_t>(cap_));
        for (int i = 0; i < cap_; ++i) l.slots[i].buf = l.slab.get() + rb * static_cast<std::size_t>(i);
        l.where.assign(static_cast<std::size_t>(E), -1);
        layers_.push_back(std::move(l));
    }
    const int threads = std::max(1, options.io_threads);
    for (int i = 0; i < threads; ++i) io_.emplace_back([this] { io_loop(); });

    // The pinned experts, all layers' at once.
    std::unique_lock lock(mutex_);
    for (std::size_t s = 0; s < layers_.size(); ++s) {
        for (int e : history_.top(static_cast<int>(s), pins_)) {
            Layer& l = layers_[s];
            Slot& slot = l.slots[l.pinned];
            slot.pinned = true;
            slot.refs = 1;  // held until read, so nothing else takes it
            start_read(static_cast<int>(s), l.pinned, e, true);
            ++l.pinned;
        }
    }
    std::string error;
    for (auto& l : layers_)
        for (int i = 0; i < l.pinned; ++i) {
            Slot& slot = l.slots[i];
            changed_.wait(lock, [&] { return slot.state != State::Loading; });
            if (slot.state == State::Failed && error.empty()) error = slot.error;
            slot.refs = 0;
        }
    if (!error.empty()) {
        lock.unlock();
        stop_io();
        throw std::runtime_error(error);
    }
    if (options.warm) queue_warm();
}

void ExpertCache::queue_warm() {
    warm_limit_ = std::max(1, options_.io_threads / 4);
    const int E = static_cast<int>(store_->header().experts);
    // Rank by rank across the layers (every layer's most used expert, then every second…),
    // so a warm-up cut short has spread over the model; no more a layer than its free slots.
    std::vector<std::vector<int>> order(layers_.size());
    for (std::size_t s = 0; s < layers_.size(); ++s) {
        const Layer& l = layers_[s];
        int room = 0;
        for (int i = l.pinned; i < cap_; ++i) room += l.slots[i].state == State::Empty;
        // The used ones by rank (top() leaves out experts never used), then the rest by id.
        std::vector<int> ranked = history_.top(static_cast<int>(s), E);
        std::vector<char> listed(static_cast<std::size_t>(E), 0);
        for (int e : ranked) listed[static_cast<std::size_t>(e)] = 1;
        for (int e = 0; e < E; ++e)
            if (!listed[static_cast<std::size_t>(e)]) ranked.push_back(e);
        for (int e : ranked)
            if (l.where[e] < 0 && static_cast<int>(order[s].size()) < room) order[s].push_back(e);
    }
    for (int rank = 0; rank < E; ++rank)
        for (std::size_t s = 0; s < layers_.size(); ++s)
            if (rank < static_cast<int>(order[s].size())) warm_.push_back({static_cast<int>(s), -1, order[s][rank]});
    changed_.notify_all();
}

bool ExpertCache::next_warm(Job& job) {
    while (!warm_.empty() && warm_in_flight_ < warm_limit_) {
        job = warm_.front();
        warm_.pop_front();
        Layer& l = layers_[job.layer];
        if (l.where[job.expert] >= 0) continue;  // asked for meanwhile
        job.slot = -1;
        for (int i = l.pinned; i < cap_ && job.slot < 0; ++i)
            if (l.slots[i].state == State::Empty && l.slots[i].refs == 0) job.slot = i;
        if (job.slot < 0) continue;  // the layer filled up on demand
        claim(l, job.slot, job.expert, true);
        ++warm_in_flight_;
        ++counts_.warmed;
        return true;
    }
    if (warm_.empty() && warm_in_flight_ == 0) warm_done_.notify_all();
    return false;
}

std::size_t ExpertCache::warm_pending() const {
    std::lock_guard lock(mutex_);
    return warm_.size() + static_cast<std::size_t>(warm_in_flight_);
}

void ExpertCache::wait_warm() const {
    std::unique_lock lock(mutex_);
    warm_done_.wait(lock, [&] { return stop_ || (warm_.empty() && warm_in_flight_ == 0); });
}

void ExpertCache::stop_io() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    changed_.notify_all();
    for (auto& t : io_) t.join();
    io_.clear();
}

ExpertCache::~ExpertCache() {
    stop_io();
    try {
        save_history();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "[experts] warning: %s\n", e.what());
    }
}

int ExpertCache::slot_of(int model_layer) const {
    const int s = store_->layer_slot(model_layer);
    if (s < 0) throw std::logic_error("expert cache: layer " + std::to_string(model_layer) + " is not sparse");
    return s;
}

void ExpertCache::io_loop() {
    for (;;) {
        Job job;
        bool warm = false;
        {
            std::unique_lock lock(mutex_);
            // Demand reads and prefetches first; a warm-up read only when none is queued
            // (a stopping cache drops the warm-up's).
            changed_.wait(lock, [&] {
                return stop_ || !jobs_.empty() || (!warm_.empty() && warm_in_flight_ < warm_limit_);
            });
            if (!jobs_.empty()) {
                job = jobs_.front();
                jobs_.pop_front();
            } else if (stop_) {
                warm_.clear();
                warm_done_.notify_all();
                return;  // stopping, nothing left
            } else if (!(warm = next_warm(job))) {
                continue;
            }
        }
        Layer& l = layers_[job.layer];
        Slot& slot = l.slots[job.slot];
        // The lane order for the records that stay: pinned ones, and every one when the
        // layer's experts all fit. Packing costs the read ~0.4 ms for 3 MB (a Zen 4 core), which
        // a record read once and soon evicted never earns back: at cap 4 of 64 packing every
        // read took the disk model from 18-20 to 13 tok/s.
        const bool lanes = slot.pinned || cap_ >= store_->experts();
        std::string error;
        try {
            store_->read(l.model_layer, job.expert, slot.buf, lanes);
        } catch (const std::exception& e) {
            error = e.what();
        }
        {
            std::lock_guard lock(mutex_);
            if (error.empty()) {
                slot.state = State::Ready;
                slot.lanes = lanes;
            } else if (slot.refs > 0) {
                slot.state = State::Failed;  // acquire() reports it
                slot.error = error;
            } else {  // an unclaimed prefetch: forget it; a demand read will report the error
                l.where[job.expert] = -1;
                slot.expert = -1;
                slot.state = State::Empty;
            }
            if (warm && --warm_in_flight_ == 0 && warm_.empty()) warm_done_.notify_all();
        }
        changed_.notify_all();
    }
}

void ExpertCache::claim(Layer& l, int slot_index, int expert, bool by_prefetch) {
    Slot& slot = l.slots[slot_index];
    if (slot.expert >= 0) l.where[slot.expert] = -1;
    slot.expert = expert;
    slot.state = State::Loading;
    slot.by_prefetch = by_prefetch;
    slot.error.clear();
    slot.used = ++clock_;
    l.where[expert] = slot_index;
}

void ExpertCache::start_read(int layer, int slot_index, int expert, bool urgent) {
    claim(layers_[layer], slot_index, expert, !urgent);
    if (urgent) jobs_.push_front({layer, slot_index, expert});
    else jobs_.push_back({layer, slot_index, expert});
    changed_.notify_all();
}

int ExpertCache::victim(const Layer& l) const {
    int best = -1;
    for (int i = l.pinned; i < cap_; ++i) {
        const Slot& s = l.slots[i];
        if (s.refs > 0 || s.state == State::Loading) continue;
        if (s.state == State::Empty) return i;
        if (best < 0 || s.used < l.slots[best].used) best = i;
    }
    return best;
}

std::size_t ExpertCache::round_size(int layer, std::span<const int> ids) const {
    std::lock_guard lock(mutex_);
    const Layer& l = layers_[slot_of(layer)];
    const int room = cap_ - l.pinned;
    int unpinned = 0;
    std::size_t n = 0;
    for (; n < ids.size(); ++n) {
        const int s = l.where[ids[n]];
        const bool is_pinned = s >= 0 && l.slots[s].pinned;
        if (!is_pinned && unpinned == room) break;
        unpinned += !is_pinned;
    }
    return std::max<std::size_t>(n, 1);
}

ExpertCache::Lease ExpertCache::acquire(int layer, std::span<const int> ids) {
    const int li = slot_of(layer);
    const auto t0 = Clock::now();
    Lease lease;
    lease.cache_ = this;
    lease.layer_ = li;
    std::unique_lock lock(mutex_);
    Layer& l = layers_[li];
    for (int e : ids) {
        int s = l.where[e];
        if (s >= 0 && l.slots[s].state != State::Failed) {
            Slot& slot = l.slots[s];
            ++counts_.hits;
            if (slot.by_prefetch) ++counts_.prefetch_hits;
            slot.by_prefetch = false;
            slot.used = ++clock_;
            ++slot.refs;
            lease.slots_.push_back(s);
            continue;
        }
        ++counts_.misses;
        // Wait for a slot: one a prefetch is filling becomes evictable once it lands.
        changed_.wait(lock, [&] { return (s = victim(l)) >= 0; });
        l.slots[s].refs = 1;
        start_read(li, s, e, true);
        lease.slots_.push_back(s);
    }
    std::string error;
    for (int s : lease.slots_) {
        Slot& slot = l.slots[s];
        changed_.wait(lock, [&] { return slot.state != State::Loading; });
        if (slot.state == State::Failed && error.empty()) error = slot.error;
    }
    counts_.wait_s += std::chrono::duration<double>(Clock::now() - t0).count();
    if (!error.empty()) {
        for (int s : lease.slots_) {
            Slot& slot = l.slots[s];
            if (slot.state == State::Failed) {
                l.where[slot.expert] = -1;
                slot.expert = -1;
                slot.state = State::Empty;
            }
        }
        lock.unlock();
        lease.release();
        throw std::runtime_error(error);
    }
    for (int s : lease.slots_) lease.ffn_.push_back(store_->view(l.slots[s].buf, l.slots[s].lanes));
    return lease;
}

void ExpertCache::release(Lease& lease) {
    std::lock_guard lock(mutex_);
    Layer& l = layers_[lease.layer_];
    for (int s : lease.slots_) --l.slots[s].refs;
    changed_.notify_all();
}

void ExpertCache::prefetch(int layer, std::span<const int> ids) {
    if (!options_.prefetch) return;
    const int li = slot_of(layer);
    std::lock_guard lock(mutex_);
    Layer& l = layers_[li];
    for (int e : ids) {
        if (l.where[e] >= 0) continue;
        const int s = victim(l);
        if (s < 0) break;
        start_read(li, s, e, false);
        ++counts_.prefetched;
    }
}

void ExpertCache::record_use(int layer, int expert, std::uint64_t rows) {
    history_.add(slot_of(layer), expert, static_cast<double>(rows));
}

void ExpertCache::end_step(std::uint64_t tokens) {
    history_.add_tokens(tokens);
    tokens_since_save_ += tokens;
    if (options_.usage_file.empty() || tokens_since_save_ < options_.save_every_tokens) return;
    try {
        save_history();
    } catch (const std::exception& e) {
        if (!save_warned_) std::fprintf(stderr, "[experts] warning: %s\n", e.what());
        save_warned_ = true;
    }
}

void ExpertCache::save_history() {
    tokens_since_save_ = 0;
    if (!options_.usage_file.empty()) history_.save(options_.usage_file);
}

ExpertCache::Counters ExpertCache::counters() const {
    Counters c;
    {
        std::lock_guard lock(mutex_);
        c = counts_;
    }
    const auto s = store_->counters();
    c.bytes_read = s.bytes;
    c.read_s = s.read_s;
    c.busy_s = s.busy_s;
    return c;
}

int ExpertCache::pinned_total() const {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (const auto& l : layers_) n += l.pinned;
    return n;
}

bool ExpertCache::resident(int layer, int expert) const {
    std::lock_guard lock(mutex_);
    const Layer& l = layers_[slot_of(layer)];
    const int s = l.where[expert];
    return s >= 0 && l.slots[s].state == State::Ready;
}

bool ExpertCache::pinned(int layer, int expert) const {
    std::lock_guard lock(mutex_);
    const Layer& l = layers_[slot_of(layer)];
    const int s = l.where[expert];
    return s >= 0 && l.slots[s].pinned;
}

std::size_t ExpertCache::slot_bytes() const {
    return static_cast<std::size_t>(store_->record_bytes()) * static_cast<std::size_t>(cap_) * layers_.size();
}

std::string ExpertCache::describe() const {
    const auto& h = store_->header();
    char line[512];
    std::snprintf(line, sizeof line,
                  "expert cache: cap %d of %lld experts per layer, pins %d (%d pinned over %zu layers), %.2f GB of "
                  "slots (%.1f MB a record), %s, %s reads, usage file %s, warm-up %s",
                  cap_, static_cast<long long>(h.experts), pins_, pinned_total(), layers_.size(),
                  static_cast<double>(slot_bytes()) / 1e9, static_cast<double>(store_->record_bytes()) / 1e6,
                  format_name(h.format), store_->direct_io() ? "O_DIRECT" : "buffered+DONTNEED",
                  options_.usage_file.empty() ? "none" : options_.usage_file.string().c_str(),
                  options_.warm ? (std::to_string(warm_pending()) + " reads").c_str() : "off");
    return line;
}

int cap_for_bytes(const ExpertStore& store, double bytes) {
    const double per = static_cast<double>(store.record_bytes()) * static_cast<double>(store.header().layers.size());
    const double n = bytes / per;
    return static_cast<int>(std::clamp<double>(n, 1.0, static_cast<double>(store.experts())));
}

int default_cap(const ExpertStore& store, std::uint64_t dense_bytes) {
    const std::uint64_t avail = platform::available_memory_bytes();
    if (avail == 0) return static_cast<int>(store.experts());
    const double left = avail > dense_bytes ? static_cast<double>(avail - dense_bytes) : 0.0;
    return cap_for_bytes(store, left / 2);
}

std::uint64_t dense_bytes_to_count(const model::Model& model) {
    return model.tensors.copied() ? 0 : model.weights.matrix_bytes;
}

std::shared_ptr<ExpertCache> make_cache(const model::Model& model, const CacheFlags& flags) {
    if (flags.warm != "on" && flags.warm != "off")  // a typo is an error with any model
        throw std::runtime_error("--warm-experts must be on or off, not '" + flags.warm + "'");
    if (!model.experts) return nullptr;
    const ExpertStore& store = *model.experts;
    const int E = static_cast<int>(store.experts());
    CacheOptions o;
    if (flags.cap) {
        if (*flags.cap < 1 || *flags.cap > E)
            throw std::runtime_error("--cap must lie in 1.." + std::to_string(E) + " (the experts per layer)");
        o.cap = *flags.cap;
    } else if (flags.ram_gb) {
        if (!(*flags.ram_gb > 0)) throw std::runtime_error("--ram-gb must be positive");
        o.cap = cap_for_bytes(store, *flags.ram_gb * 1e9);
    } else {
        o.cap = default_cap(store, dense_bytes_to_count(model));
    }
    if (flags.pins) {
        if (*flags.pins < 0 || *flags.pins >= o.cap)
            throw std::runtime_error("--pin-experts must lie in 0.." + std::to_string(o.cap - 1) + " (below the cap, " +
                                     std::to_string(o.cap) + ")");
        o.pins = *flags.pins;
    }
    if (flags.usage_file) {
        if (*flags.usage_file != "off") o.usage_file = *flags.usage_file;
    } else if (platform::writable(model.dir)) {
        o.usage_file = model.dir / "expert-usage.json";
    } else {
        std::fprintf(stderr, "[experts] %s is not writable: no expert usage history (--usage-file PATH sets one)\n",
                     model.dir.string().c_str());
    }
    o.warm = flags.warm == "on";
    auto cache = std::make_shared<ExpertCache>(model.experts, o);
    std::fprintf(stderr, "[experts] %s\n", cache->describe().c_str());
    return cache;
}

}  // namespace inkling::experts
