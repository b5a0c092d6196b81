#include "engine/forward/session_state.h"

#include <algorithm>

namespace inkling::forward {

void SessionState::reset() {
    len = 0;
    fed.clear();
    tainted = false;
    device_token = 0;
    for (auto& layer : layers)
        for (auto& c : layer.conv) std::fill(c.begin(), c.end(), 0.0f);
}

SessionState make_session(const model::Config& c, std::int64_t capacity) {
    SessionState s;
    s.capacity = capacity;
    const std::int64_t taps = c.conv_kernel - 1;
    for (int i = 0; i < c.layers; ++i) {
        LayerState L;
        L.kv_heads = c.layer_kv_heads(i);
        L.head_dim = c.layer_head_dim(i);
        L.rows = c.kinds[i].local ? std::min<std::int64_t>(c.window, capacity) : capacity;
        const std::size_t kv = static_cast<std::size_t>(L.kv_heads) * L.rows * L.head_dim;
        L.k.assign(kv, 0.0f);
        L.v.assign(kv, 0.0f);
        const std::int64_t kvd = static_cast<std::int64_t>(L.kv_heads) * L.head_dim;
        L.conv[0].assign(static_cast<std::size_t>(kvd * taps), 0.0f);
        L.conv[1].assign(static_cast<std::size_t>(kvd * taps), 0.0f);
        L.conv[2].assign(static_cast<std::size_t>(c.hidden * taps), 0.0f);
        L.conv[3].assign(static_cast<std::size_t>(c.hidden * taps), 0.0f);
        s.layers.push_back(std::move(L));
    }
    return s;
}

}  // namespace inkling::forward
