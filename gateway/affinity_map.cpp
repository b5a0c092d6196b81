#include "gateway/affinity_map.h"

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

}  // namespace inkling::gateway
