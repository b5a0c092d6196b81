#include "engine/serve/pin_pool.h"

#include <algorithm>

namespace inkling::serve {

void PinPool::pin(int slot, const forward::SessionState& state, const model::Config& config) {
    if (capacity_ == 0) return;
    Entry e;
    e.slot = slot;
    e.ids = state.fed;
    e.tainted = state.tainted;
    e.last_used = ++clock_;
    for (std::size_t i = 0; i < state.layers.size(); ++i) {
        const auto& L = state.layers[i];
        e.conv.push_back(L.conv);
        const bool ring = config.kinds[i].local && L.rows < state.capacity;
        e.ring_k.push_back(ring ? L.k : std::vector<float>{});
        e.ring_v.push_back(ring ? L.v : std::vector<float>{});
    }
    for (auto& old : entries_)
        if (old.slot == slot && old.ids == e.ids) {
            old = std::move(e);
            return;
        }
    if (entries_.size() < capacity_) {
        entries_.push_back(std::move(e));
        return;
    }
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
    *lru = std::move(e);
}

std::optional<std::int64_t> PinPool::restore(int slot, std::span<const std::int32_t> prompt,
                                             forward::SessionState& state) {
    Entry* best = nullptr;
    for (auto& e : entries_) {
        if (e.slot != slot || e.tainted || e.ids.size() >= prompt.size()) continue;
        if (!std::equal(e.ids.begin(), e.ids.end(), prompt.begin())) continue;
        // The slot's K/V rows below the pin must still be the pinned ones.
        if (state.tainted || state.fed.size() < e.ids.size() ||
            !std::equal(e.ids.begin(), e.ids.end(), state.fed.begin()))
            continue;
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
    return state.len;
}

void PinPool::drop_slot(int slot) {
    std::erase_if(entries_, [&](const Entry& e) { return e.slot == slot; });
}

}  // namespace inkling::serve
