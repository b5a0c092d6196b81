// Pinned snapshots: a slot's state photographed at a point of its prefill, so a later
// prompt that shares that prefix restores it instead of prefilling again. Taken at the end
// of a pin=1 prompt and at every turn boundary of a prompt (the position before a token
// that opens a message, --turn-tokens), so a regenerated or edited last turn, or a branch,
// resumes from the last boundary it shares with the slot's conversation.
//
// Global layers' K/V rows are not copied — they stay in the slot, indexed by position,
// valid while the slot's prefix record still starts with the pinned ids. The conv
// histories and the sliding layers' rings (which later positions overwrite) are copied.
// The pool is bounded by a count and by bytes (ids, convs and rings together); past
// either, the least recently used snapshots go first.
#pragma once

#include <cstdint>
#include <array>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/forward/session_state.h"
#include "engine/model/config.h"

namespace inkling::serve {

class PinPool {
public:
    PinPool(std::size_t capacity, std::size_t budget_bytes) : capacity_(capacity), budget_(budget_bytes) {}

    // Photographs `state` (its whole record is the pinned prefix). An entry with the same
    // ids is only marked used (the same ids on the same slot's valid record are the same
    // state: the forward is deterministic); else the new one is added and the least
    // recently used dropped while the pool is over its count or bytes. A tainted state is
    // not photographed: such a snapshot would never be restored.
    void pin(int slot, const forward::SessionState& state, const model::Config& config);

    // The deepest snapshot of `slot` whose ids are a strict prefix of `prompt` and still
    // held by the slot's record (never when the slot is audio-tainted: its record does not
    // say what its rows hold); restores it into `state` and returns its length.
    std::optional<std::int64_t> restore(int slot, std::span<const std::int32_t> prompt,
                                        forward::SessionState& state);

    // The slot keeps its first `kept` positions and is about to be fed `prompt` from there:
    // its snapshots deeper than `kept` that disagree with `prompt` describe rows that are
    // being overwritten, and go (they could never be restored again).
    void drop_diverged(int slot, std::span<const std::int32_t> prompt, std::int64_t kept);
    // The bytes one snapshot of a `capacity`-position state of this model takes, less its
    // ids (4 bytes a position): its conv histories and sliding rings.
    static std::size_t state_bytes(const model::Config& config, std::int64_t capacity);
    void drop_slot(int slot);
    bool enabled() const { return capacity_ > 0 && budget_ > 0; }
    std::size_t size() const { return entries_.size(); }
    std::size_t bytes() const { return bytes_; }
    nlohmann::json stats() const;  // STATS "snapshots"

private:
    struct Entry {
        int slot;
        std::vector<std::int32_t> ids;
        std::vector<std::array<std::vector<float>, 4>> conv;  // per layer
        std::vector<std::vector<float>> ring_k, ring_v;       // per layer; empty on global layers
        std::uint64_t last_used;
        std::size_t bytes = 0;
    };
    void evict_to_bounds();
    void erase_at(std::size_t i);
    std::size_t capacity_, budget_;
    std::vector<Entry> entries_;
    std::uint64_t clock_ = 0;
    std::size_t bytes_ = 0;
    std::uint64_t taken_ = 0, restored_ = 0, tokens_restored_ = 0, evicted_ = 0, diverged_ = 0;
};

}  // namespace inkling::serve
