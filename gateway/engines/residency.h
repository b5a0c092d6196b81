// Which models' engines are resident: the decisions behind on-demand loading, the idle
// unload (--model-idle-timeout) and the memory budget (--memory-budget), over a snapshot of
// the models, with no I/O (gateway/engines/models.h acts on them;
// tests/gateway/engines/models_test.cpp).
//
//   RoomPlan p = make_room(snapshot, want, budget);
//   if (p.fits) { for (i : p.unload) unload(i); ... then start `want` }   // else: wait, or refuse
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace inkling::gateway {

struct Residency {
    using Clock = std::chrono::steady_clock;
    std::uint64_t bytes = 0;  // what it holds resident
    bool resident = false;    // an engine runs for it (loading, ready, restarting or stopping)
    bool unloadable = false;  // resident, ready or failed, no request holds or awaits it, not already stopping
    Clock::time_point last_used{};
};

struct RoomPlan {
    bool fits = false;               // `want` fits once `unload` are gone
    std::vector<std::size_t> unload;  // least recently used first; empty when it fits now
};

// To make models[want] resident under `budget` bytes (0: no budget): the idle models to unload,
// least recently used first, as few as it takes. Models that are resident and not unloadable
// (busy, loading, stopping) keep their bytes. fits is false when even unloading every idle
// one leaves too little (for now: a busy model may become idle), or when `want` alone is over
// the budget (never: the caller checks that at start).
RoomPlan make_room(const std::vector<Residency>& models, std::size_t want, std::uint64_t budget);

// The unloadable models idle for `timeout` or longer at `now` (a zero timeout: none).
std::vector<std::size_t> idle_expired(const std::vector<Residency>& models, Residency::Clock::time_point now,
                                      Residency::Clock::duration timeout);

// When the next unloadable model reaches `timeout` idle (time_point::max() if none, or no timeout).
Residency::Clock::time_point next_idle_expiry(const std::vector<Residency>& models, Residency::Clock::duration timeout);

}  // namespace inkling::gateway
