// Slot affinity: which engine slot served a conversation last, so its next turn goes there
// and the engine reuses the prefix. Keys are 64-bit hashes of the conversation's identity
// (its system messages and first user turn, which can be megabytes); at most `capacity`
// entries, the least recently used dropped first, so memory stays at a few dozen bytes an
// entry whatever the prompts. A collision only costs a prefill.
//
//   AffinityMap m(4096);
//   if (auto slot = m.find(key)) prefer(*slot);
//   m.remember(key, slot);   // after the engine ACCEPTed the request
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inkling::gateway {

class AffinityMap {
public:
    explicit AffinityMap(std::size_t capacity) : capacity_(capacity) {}

    static std::uint64_t key_of(std::string_view conversation);

    // The slot last remembered for `key` (and it becomes the most recently used).
    std::optional<int> find(std::uint64_t key);
    void remember(std::uint64_t key, int slot);

    std::size_t size() const { return index_.size(); }
    std::size_t capacity() const { return capacity_; }
    // What the entries hold, their nodes included (an estimate: list node + hash node).
    std::size_t bytes() const { return index_.size() * kBytesPerEntry; }
    static constexpr std::size_t kBytesPerEntry = 3 * sizeof(void*) + sizeof(std::pair<std::uint64_t, int>) +
                                                  4 * sizeof(void*) + sizeof(std::uint64_t);

private:
    using Order = std::list<std::pair<std::uint64_t, int>>;  // most recent first
    std::size_t capacity_;
    Order order_;
    std::unordered_map<std::uint64_t, Order::iterator> index_;
};

// Which slot a conversation the map does not know should take: the one whose prefix was
// remembered longest ago (never: first), so new conversations spread over the slots instead
// of two landing in one by their hashes and evicting each other's prefix. Among slots never
// used, the hashed one (`key % slots`) wins, then the lowest.
class SlotRecency {
public:
    explicit SlotRecency(int slots) : last_(static_cast<std::size_t>(slots), 0) {}
    int coldest(std::uint64_t key) const;
    void touch(int slot);  // a conversation's turn was remembered in it

private:
    std::vector<std::uint64_t> last_;  // per slot: the touch counter when last touched, 0 never
    std::uint64_t clock_ = 0;
};

}  // namespace inkling::gateway
