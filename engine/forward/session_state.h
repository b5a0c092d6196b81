// Everything one conversation leaves behind in the model: K/V rows (a ring of `window`
// rows on sliding layers), the four short-conv input histories per layer, and the
// prefix record — the ids fed so far, recorded where they are fed.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace inkling::forward {

struct LayerState {
    int kv_heads = 0, head_dim = 0;
    std::int64_t rows = 0;      // K/V rows held: the window on sliding layers, else capacity
    std::vector<float> k, v;    // [kv_heads][rows][head_dim]; position t lives at row t % rows
    // Last kernel-1 raw inputs of each short conv, [channels][kernel-1], oldest first:
    // 0 = K, 1 = V, 2 = attention output, 3 = MLP output.
    std::array<std::vector<float>, 4> conv;
};

struct SessionState {
    std::int64_t capacity = 0;  // positions this state can hold
    std::int64_t len = 0;       // positions fed
    std::vector<std::int32_t> fed;  // the ids behind those positions
    bool tainted = false;       // fed something ids cannot describe (audio): never reuse
    std::vector<LayerState> layers;
    // Non-zero while the Vulkan chain's mirror of this state is current (the chain sets
    // it); whatever else writes the state clears it (vulkan/chain.h).
    std::uint64_t device_token = 0;

    // Back to an empty conversation. K/V rows need no clearing: they are read by position.
    void reset();
};

SessionState make_session(const model::Config& config, std::int64_t capacity);

}  // namespace inkling::forward
