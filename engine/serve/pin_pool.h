// Pinned snapshots (SUBMIT pin=1): a slot's state photographed right after a prefill, so
// a later prompt that extends the same prefix restores it instead of prefilling again.
// Global layers' K/V rows are not copied — they stay in the slot, indexed by position,
// valid while the slot's prefix record still starts with the pinned ids. The conv
// histories and the sliding layers' rings (which later positions overwrite) are copied.
#pragma once

#include <cstdint>
#include <array>
#include <optional>
#include <span>
#include <vector>

#include "engine/forward/session_state.h"
#include "engine/model/config.h"

namespace inkling::serve {

class PinPool {
public:
    explicit PinPool(std::size_t capacity) : capacity_(capacity) {}

    // Photographs `state` (its whole record is the pinned prefix). Refreshes an entry with
    // the same ids, else takes a free entry, else evicts the least recently used.
    void pin(int slot, const forward::SessionState& state, const model::Config& config);

    // The deepest untainted snapshot of `slot` whose ids are a strict prefix of `prompt`
    // and still held by the slot's record; restores it into `state` and returns its length.
    // A snapshot taken of an audio-tainted state is never restored: its ids do not say
    // what it holds (the same ids as text are another state).
    std::optional<std::int64_t> restore(int slot, std::span<const std::int32_t> prompt,
                                        forward::SessionState& state);

    void drop_slot(int slot);
    std::size_t size() const { return entries_.size(); }

private:
    struct Entry {
        int slot;
        std::vector<std::int32_t> ids;
        std::vector<std::array<std::vector<float>, 4>> conv;  // per layer
        std::vector<std::vector<float>> ring_k, ring_v;       // per layer; empty on global layers
        bool tainted = false;  // photographed after audio: its ids do not describe it, never restored
        std::uint64_t last_used;
    };
    std::size_t capacity_;
    std::vector<Entry> entries_;
    std::uint64_t clock_ = 0;
};

}  // namespace inkling::serve
