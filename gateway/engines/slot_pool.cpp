#include "gateway/engines/slot_pool.h"

#include <algorithm>

namespace inkling::gateway {

int SlotPool::free_slot(int preferred) const {
    if (preferred >= 0 && preferred < slots() && !busy_[preferred]) return preferred;
    for (int i = 0; i < slots(); ++i)
        if (!busy_[i]) return i;
    return -1;
}

int SlotPool::active() const { return static_cast<int>(std::count(busy_.begin(), busy_.end(), true)); }

awaitable<SlotPool::Result> SlotPool::acquire(int preferred, asio::steady_timer::time_point deadline,
                                              const bool& abandoned, std::shared_ptr<Signal> wake) {
    if (queue_.empty()) {
        if (int s = free_slot(preferred); s >= 0) {
            busy_[s] = true;
            co_return Result{Outcome::Acquired, s};
        }
    }
    if (static_cast<int>(queue_.size()) >= max_queue_) co_return Result{Outcome::QueueFull};
    queue_.push_back(wake);
    Result result{Outcome::TimedOut};
    while (true) {
        if (abandoned) {
            result = {Outcome::Abandoned};
            break;
        }
        if (queue_.front() == wake) {
            if (int s = free_slot(preferred); s >= 0) {
                busy_[s] = true;
                result = {Outcome::Acquired, s};
                break;
            }
        }
        if (asio::steady_timer::clock_type::now() >= deadline) break;
        co_await wake->wait(deadline);
    }
    std::erase(queue_, wake);
    if (!queue_.empty()) queue_.front()->notify();  // the next in line may go now
    co_return result;
}

void SlotPool::release(int slot) {
    if (slot >= 0 && slot < slots()) busy_[slot] = false;
    if (!queue_.empty()) queue_.front()->notify();
}

}  // namespace inkling::gateway
