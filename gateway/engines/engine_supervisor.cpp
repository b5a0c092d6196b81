#include "gateway/engines/engine_supervisor.h"

#include "gateway/metrics.h"

namespace inkling::gateway {

using Clock = EngineLife::Clock;

awaitable<std::optional<EngineEvent>> RequestStream::next(asio::steady_timer::time_point deadline) {
    if (events_.empty()) co_await signal_.wait(deadline);
    if (events_.empty()) co_return std::nullopt;
    EngineEvent e = std::move(events_.front());
    events_.pop_front();
    co_return e;
}

EngineSupervisor::EngineSupervisor(asio::io_context& io, Options options, Metrics& metrics)
    : io_(io),
      link_(io, options.argv,
            ProcessLink::Reports{
                .output =
                    [this](std::string_view bytes) {
                        life_.on_output(Clock::now(), bytes);
                        changed();
                    },
                .errors = [this](std::string_view bytes) { life_.on_stderr(bytes); },
                .exit =
                    [this](EngineExit exit) {
                        life_.on_exit(Clock::now(), exit);
                        changed();
                    },
            }),
      life_(link_, options, metrics), state_changed_(io.get_executor()), timer_wake_(io.get_executor()) {
    life_.on_state_change = [this] {
        state_changed_.notify_all();
        if (on_change) on_change();
    };
}

EngineSupervisor::~EngineSupervisor() = default;

void EngineSupervisor::changed() {
    state_changed_.notify_all();
    timer_wake_.notify();  // the next deadline may have moved
}

// The one timer: sleeps until EngineLife's next deadline (or a change), then ticks it.
awaitable<void> EngineSupervisor::run_timer() {
    while (life_.state() != State::Stopped) {
        co_await timer_wake_.wait(life_.next_tick());
        life_.tick(Clock::now());
        state_changed_.notify_all();
    }
    timer_running_ = false;
}

void EngineSupervisor::start() {
    if (started_ && life_.state() != State::Stopped) return;
    if (started_) life_.reload(Clock::now());
    else life_.start(Clock::now());
    started_ = true;
    // A timer that has not yet seen the Stopped state goes on (it loops while not Stopped).
    if (timer_running_) return timer_wake_.notify();
    timer_running_ = true;
    asio::co_spawn(io_, run_timer(), asio::detached);
}

awaitable<void> EngineSupervisor::shutdown() {
    life_.shutdown(Clock::now());
    changed();
    // EngineLife kills an engine that has not exited by its stop deadline; this bound only
    // guards against an exit that is never reported.
    const auto give_up = Clock::now() + life_.options().stop_deadline + std::chrono::seconds(10);
    while (life_.state() != State::Stopped && Clock::now() < give_up) co_await state_changed_.wait(give_up);
}

awaitable<bool> EngineSupervisor::wait_ready(asio::steady_timer::time_point deadline) {
    while (!life_.admitting()) {
        if (life_.refusing() || Clock::now() >= deadline) co_return false;
        co_await state_changed_.wait(deadline);
    }
    co_return true;
}

std::shared_ptr<RequestStream> EngineSupervisor::submit(protocol::Submit request) {
    auto stream = std::make_shared<RequestStream>(io_.get_executor(), std::string());
    stream->id_ = life_.submit(std::move(request), stream);
    return stream;
}

void EngineSupervisor::stop(const std::string& id) { life_.stop(id); }
void EngineSupervisor::cancel(const std::string& id) { life_.cancel(id); }
void EngineSupervisor::release(const std::string& id) {
    life_.release(id);
    changed();
}
void EngineSupervisor::request_stats() { life_.request_stats(); }
void EngineSupervisor::kill_engine() { life_.kill_engine(); }

}  // namespace inkling::gateway
