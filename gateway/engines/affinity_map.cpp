#include "gateway/engines/affinity_map.h"

namespace inkling::gateway {

std::uint64_t AffinityMap::key_of(std::string_view conversation) {
    // FNV-1a, 64-bit: stable across runs and builds (std::hash need not be).
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : conversation) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

std::optional<int> AffinityMap::find(std::uint64_t key) {
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
}

void AffinityMap::remember(std::uint64_t key, int slot) {
    if (capacity_ == 0) return;
    if (auto it = index_.find(key); it != index_.end()) {
        it->second->second = slot;
        order_.splice(order_.begin(), order_, it->second);
        return;
    }
    if (index_.size() >= capacity_) {
        index_.erase(order_.back().first);
        order_.pop_back();
    }
    order_.emplace_front(key, slot);
    index_.emplace(key, order_.begin());
}

int SlotRecency::coldest(std::uint64_t key) const {
    const int hashed = static_cast<int>(key % static_cast<std::uint64_t>(last_.size()));
    int best = hashed;
    for (int i = 0; i < static_cast<int>(last_.size()); ++i)
        if (last_[static_cast<std::size_t>(i)] < last_[static_cast<std::size_t>(best)]) best = i;
    return best;
}

void SlotRecency::touch(int slot) {
    if (slot >= 0 && static_cast<std::size_t>(slot) < last_.size()) last_[static_cast<std::size_t>(slot)] = ++clock_;
}

}  // namespace inkling::gateway
