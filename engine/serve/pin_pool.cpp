#include "engine/serve/pin_pool.h"

#include <algorithm>

namespace inkling::serve {

namespace {

std::size_t floats_bytes(const std::vector<float>& v) { return v.size() * sizeof(float); }

}  // namespace

void PinPool::pin(int slot, const forward::SessionState& state, const model::Config& config) {
    // An audio-tainted state's ids do not describe it: a snapshot of it could only ever be
    // restored wrongly, so none is taken (the rule that keeps audio out of text requests).
    if (!enabled() || state.tainted || state.fed.empty()) return;
    for (auto& old : entries_)
        if (old.slot == slot && old.ids == state.fed) {
            old.last_used = ++clock_;
            return;
        }
    Entry e;
    e.slot = slot;
    e.ids = state.fed;
    e.last_used = ++clock_;
    e.bytes = e.ids.size() * sizeof(std::int32_t);
    for (std::size_t i = 0; i < state.layers.size(); ++i) {
        const auto& L = state.layers[i];
        e.conv.push_back(L.conv);
        for (const auto& c : L.conv) e.bytes += floats_bytes(c);
        const bool ring = config.kinds[i].local && L.rows < state.capacity;
        e.ring_k.push_back(ring ? L.k : std::vector<float>{});
        e.ring_v.push_back(ring ? L.v : std::vector<float>{});
        e.bytes += floats_bytes(e.ring_k.back()) + floats_bytes(e.ring_v.back());
    }
    bytes_ += e.bytes;
    entries_.push_back(std::move(e));
    ++taken_;
    evict_to_bounds();
}

void PinPool::evict_to_bounds() {
    while (!entries_.empty() && (entries_.size() > capacity_ || bytes_ > budget_)) {
        auto lru = std::min_element(entries_.begin(), entries_.end(),
                                    [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
        erase_at(static_cast<std::size_t>(lru - entries_.begin()));
        ++evicted_;
    }
}

void PinPool::erase_at(std::size_t i) {
    bytes_ -= entries_[i].bytes;
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

std::optional<std::int64_t> PinPool::restore(int slot, std::span<const std::int32_t> prompt,
                                             forward::SessionState& state) {
    if (state.tainted) return std::nullopt;
    Entry* best = nullptr;
    for (auto& e : entries_) {
        if (e.slot != slot || e.ids.size() >= prompt.size()) continue;
        if (!std::equal(e.ids.begin(), e.ids.end(), prompt.begin())) continue;
        // The slot's K/V rows below the pin must still be the pinned ones.
        if (state.fed.size() < e.ids.size() || !std::equal(e.ids.begin(), e.ids.end(), state.fed.begin())) continue;
        if (!best || e.ids.size() > best->ids.size()) best = &e;
    }
    if (!best) return std::nullopt;
    best->last_used = ++clock_;
    for (std::size_t i = 0; i < state.layers.size(); ++i) {
        auto& L = state.layers[i];
        L.conv = best->conv[i];
        if (!best->ring_k[i].empty()) {
            L.k = best->ring_k[i];
            L.v = best->ring_v[i];
        }
    }
    state.fed = best->ids;
    state.len = static_cast<std::int64_t>(best->ids.size());
    state.device_token = 0;  // the host wrote it alone: a device mirror re-uploads
    ++restored_;
    tokens_restored_ += best->ids.size();
    return state.len;
}

void PinPool::drop_diverged(int slot, std::span<const std::int32_t> prompt, std::int64_t kept) {
    for (std::size_t i = entries_.size(); i-- > 0;) {
        const Entry& e = entries_[i];
        if (e.slot != slot || static_cast<std::int64_t>(e.ids.size()) <= kept) continue;
        const std::size_t n = std::min(e.ids.size(), prompt.size());
        if (std::equal(e.ids.begin(), e.ids.begin() + static_cast<std::ptrdiff_t>(n), prompt.begin())) continue;
        erase_at(i);
        ++diverged_;
    }
}

void PinPool::drop_slot(int slot) {
    for (std::size_t i = entries_.size(); i-- > 0;)
        if (entries_[i].slot == slot) erase_at(i);
}

std::size_t PinPool::state_bytes(const model::Config& config, std::int64_t capacity) {
    const auto s = forward::make_session(config, std::min<std::int64_t>(capacity, config.window + 1));
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const auto& L = s.layers[i];
        for (const auto& c : L.conv) bytes += floats_bytes(c);
        if (config.kinds[i].local && config.window < capacity) bytes += floats_bytes(L.k) + floats_bytes(L.v);
    }
    return bytes;
}

nlohmann::json PinPool::stats() const {
    return {{"held", entries_.size()},       {"bytes", bytes_},         {"max", capacity_},
            {"budget_bytes", budget_},       {"taken", taken_},         {"restored", restored_},
            {"tokens_restored", tokens_restored_}, {"evicted", evicted_}, {"diverged", diverged_}};
}

}  // namespace inkling::serve
