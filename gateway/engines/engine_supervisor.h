// The engine child on the gateway's io_context: EngineLife (gateway/engines/engine_life.h, the
// states, watchdog, drain and restarts, no I/O) driven by a ProcessLink (the pipes) and
// one timer, plus what the HTTP handlers await: wait_ready() and each request's stream.
//
// Everything runs on the gateway's one io_context thread.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/asio.h"
#include "gateway/engines/engine_life.h"
#include "gateway/engines/process_link.h"
#include "protocol/frames.h"

namespace inkling::gateway {

class Metrics;

// One request's frames, in order, as the engine sends them.
class RequestStream : public RequestSink {
public:
    RequestStream(asio::any_io_executor ex, std::string id) : id_(std::move(id)), signal_(ex) {}
    const std::string& id() const { return id_; }
    void push(EngineEvent e) override {
        events_.push_back(std::move(e));
        signal_.notify();
    }
    // The next event, or nullopt when `deadline` passes or wake() was called first.
    awaitable<std::optional<EngineEvent>> next(asio::steady_timer::time_point deadline);
    void wake() { signal_.notify(); }  // e.g. the client went away

private:
    friend class EngineSupervisor;
    std::string id_;
    std::deque<EngineEvent> events_;
    Signal signal_;
};

class EngineSupervisor {
public:
    using State = EngineLife::State;
    struct Options : EngineLife::Options {
        std::vector<std::string> argv;  // the engine command line
    };

    EngineSupervisor(asio::io_context& io, Options options, Metrics& metrics);
    ~EngineSupervisor();

    // Starts the engine; after shutdown() (Stopped) starts a new one (a model reloaded).
    void start();
    bool stopping() const { return life_.stopping(); }
    // After every state change (gateway/engines/models.h watches its engines).
    std::function<void()> on_change;
    // Where its log lines go (EngineLife::log): several models' engines name theirs.
    void set_log(std::function<void(const std::string&)> log) { life_.log = std::move(log); }
    // Stops taking requests, lets the engine finish what it has, then ends it.
    awaitable<void> shutdown();

    State state() const { return life_.state(); }
    static const char* state_name(State s) { return EngineLife::state_name(s); }
    const std::string& reason() const { return life_.reason(); }
    double seconds_to_next_attempt() const { return life_.seconds_to_next_attempt(EngineLife::Clock::now()); }
    int restarts() const { return life_.restarts(); }
    int device_losses() const { return life_.device_losses(); }
    long pid() const { return life_.pid(); }
    const std::deque<std::string>& stderr_tail() const { return life_.stderr_tail(); }
    const std::string& last_stderr() const { return life_.last_stderr(); }
    static constexpr std::size_t kStderrTailLines = EngineLife::kStderrTailLines;
    const nlohmann::json& info() const { return life_.info(); }
    const nlohmann::json& stats() const { return life_.stats(); }
    const nlohmann::json& load_progress() const { return life_.load_progress(); }
    std::size_t in_flight() const { return life_.in_flight(); }

    // Waits until the engine admits requests; false if it is failed or stopping, or the
    // deadline passed.
    awaitable<bool> wait_ready(asio::steady_timer::time_point deadline);
    // Sends SUBMIT with a fresh engine-side id; the stream gets its frames.
    std::shared_ptr<RequestStream> submit(protocol::Submit request);
    void stop(const std::string& id);
    void cancel(const std::string& id);
    void release(const std::string& id);  // the handler is done with this id
    void request_stats();
    // Test hook and operator tool: SIGKILL the engine now.
    void kill_engine();

private:
    // After anything that may change the state or the next deadline.
    void changed();
    awaitable<void> run_timer();

    asio::io_context& io_;
    ProcessLink link_;
    EngineLife life_;
    Broadcast state_changed_;
    Signal timer_wake_;
    bool started_ = false, timer_running_ = false;
};

}  // namespace inkling::gateway
