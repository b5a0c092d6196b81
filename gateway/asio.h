// The one place that includes Boost.Asio/Beast/Process. <utility> must come first: Boost
// 1.74's awaitable.hpp uses std::exchange without including it, which g++ 12 in C++20
// mode rejects. Keep this header out of other headers so rebuilds stay fast.
#pragma once

#include <utility>

#include <set>

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast.hpp>

namespace inkling::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::use_awaitable;

// A one-shot-at-a-time wake-up for coroutines on one io_context: wait() suspends until
// notify() (or the deadline), the asio stand-in for a condition variable.
class Signal {
public:
    explicit Signal(asio::any_io_executor ex) : timer_(ex) { timer_.expires_at(asio::steady_timer::time_point::max()); }
    void notify() { timer_.cancel(); }
    // Returns after notify() or when `deadline` passes.
    awaitable<void> wait(asio::steady_timer::time_point deadline = asio::steady_timer::time_point::max()) {
        timer_.expires_at(deadline);
        boost::system::error_code ec;
        co_await timer_.async_wait(asio::redirect_error(use_awaitable, ec));
        timer_.expires_at(asio::steady_timer::time_point::max());
    }

private:
    asio::steady_timer timer_;
};

// Wakes every waiting coroutine at once (a condition variable's notify_all), each with its
// own deadline. (One Signal shared by several waiters would have each wait() cancel the
// others' waits: they would wake each other in turn, forever.)
class Broadcast {
public:
    explicit Broadcast(asio::any_io_executor ex) : ex_(std::move(ex)) {}
    awaitable<void> wait(asio::steady_timer::time_point deadline = asio::steady_timer::time_point::max()) {
        asio::steady_timer timer(ex_, deadline);
        waiting_.insert(&timer);
        boost::system::error_code ec;
        co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
        waiting_.erase(&timer);
    }
    void notify_all() {
        for (auto* t : waiting_) t->cancel();
    }

private:
    asio::any_io_executor ex_;
    std::set<asio::steady_timer*> waiting_;
};

}  // namespace inkling::gateway
