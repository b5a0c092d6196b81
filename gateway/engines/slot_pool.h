// Admission: requests wait here for an engine slot, first come first served, in a
// bounded queue. A conversation prefers the slot its earlier turns used, so the engine
// can reuse that slot's prefix; when that slot is busy it takes any free one.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "gateway/asio.h"

namespace inkling::gateway {

class SlotPool {
public:
    SlotPool(asio::any_io_executor ex, int slots, int max_queue) : ex_(ex), busy_(slots, false), max_queue_(max_queue) {}

    enum class Outcome { Acquired, QueueFull, TimedOut, Abandoned };
    struct Result {
        Outcome outcome;
        int slot = -1;
    };
    // `abandoned` is polled whenever the waiter wakes (e.g. the client hung up).
    awaitable<Result> acquire(int preferred, asio::steady_timer::time_point deadline, const bool& abandoned,
                              std::shared_ptr<Signal> wake);
    void release(int slot);
    int slots() const { return static_cast<int>(busy_.size()); }
    int queued() const { return static_cast<int>(queue_.size()); }
    int active() const;
    int max_queue() const { return max_queue_; }

private:
    int free_slot(int preferred) const;
    asio::any_io_executor ex_;
    std::vector<bool> busy_;
    int max_queue_;
    std::deque<std::shared_ptr<Signal>> queue_;
};

}  // namespace inkling::gateway
