// The engine child and its life: spawn `inkling serve` on pipes, wait for READY, route
// its frames to the requests waiting for them, restart it after an exit, a crash or a
// device-lost EVENT (exponential backoff, crash-loop cap), and drain it on shutdown.
// Named states, one log line per transition:
//
//   starting → ready → (exit | crash | device lost) → restarting → starting …
//   crash loop (deaths before READY or soon after) → failed → (backoff) → restarting …
// It never gives up: failed says why and when the next attempt is.
//
// Everything runs on the gateway's one io_context thread.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/asio.h"
#include "protocol/frames.h"

namespace inkling::gateway {

class Metrics;

// The engine ended while the request was in flight; `accepted` says whether it had
// already been ACCEPTed (a request that was not can be retried on the next engine).
struct EngineDied {
    bool accepted = false;
    std::string reason;
};

using EngineEvent = std::variant<protocol::Accept, protocol::Data, protocol::Done, protocol::Error, EngineDied>;

// One request's frames, in order, as the engine sends them.
class RequestStream {
public:
    RequestStream(asio::any_io_executor ex, std::string id) : id_(std::move(id)), signal_(ex) {}
    const std::string& id() const { return id_; }
    void push(EngineEvent e) {
        events_.push_back(std::move(e));
        signal_.notify();
    }
    // The next event, or nullopt when `deadline` passes or wake() was called first.
    awaitable<std::optional<EngineEvent>> next(asio::steady_timer::time_point deadline);
    void wake() { signal_.notify(); }  // e.g. the client went away
    bool accepted = false;

private:
    std::string id_;
    std::deque<EngineEvent> events_;
    Signal signal_;
};

class EngineSupervisor {
public:
    enum class State { Starting, Ready, Unresponsive, Restarting, Failed, Stopped };
    struct Options {
        std::vector<std::string> argv;       // the engine command line
        // Waits before restarting after a quick death: doubling from first to max.
        std::chrono::milliseconds backoff_first{250}, backoff_max{30000};
        std::chrono::seconds settle{5};   // a death sooner than this after READY is a quick one
        int crash_loop_limit = 3;         // quick deaths in a row → "failed" (still retrying)
        // The watchdog: a STATS request every `ping`; no frame within `deadline` of it (or no
        // READY within `start_deadline` of the start) → unresponsive: killed and restarted.
        std::chrono::milliseconds ping{5000}, deadline{15000}, start_deadline{600000};
    };

    EngineSupervisor(asio::io_context& io, Options options, Metrics& metrics);
    ~EngineSupervisor();

    void start();
    // Stops taking requests, lets the engine finish what it has, then ends it.
    awaitable<void> shutdown();

    State state() const { return state_; }
    // While restarting or failed: seconds until the next start (0 otherwise, or now).
    double seconds_to_next_attempt() const;
    static const char* state_name(State s);
    const std::string& reason() const { return reason_; }
    int restarts() const { return restarts_; }
    int device_losses() const { return device_losses_; }
    long pid() const;
    // The last lines the engine (this one or the ones before) wrote to stderr, oldest
    // first, and the last non-empty one ("" when none).
    const std::deque<std::string>& stderr_tail() const { return stderr_tail_; }
    const std::string& last_stderr() const { return last_stderr_; }
    static constexpr std::size_t kStderrTailLines = 50, kStderrLineBytes = 1024;
    const nlohmann::json& info() const { return info_; }
    const nlohmann::json& stats() const { return stats_; }
    std::size_t in_flight() const { return streams_.size(); }

    // Waits until the engine is ready; false if it failed or the deadline passed.
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
    struct Child;
    awaitable<void> supervise();
    awaitable<void> read_loop(std::shared_ptr<Child> child);
    awaitable<void> write_loop(std::shared_ptr<Child> child);
    awaitable<void> stderr_loop(std::shared_ptr<Child> child);
    awaitable<void> watchdog(std::shared_ptr<Child> child);
    void send(const protocol::Frame& frame);
    void on_frame(const protocol::Frame& frame);
    void set_state(State s, std::string reason);
    void close_if_idle();

    asio::io_context& io_;
    Options options_;
    Metrics& metrics_;
    State state_ = State::Starting;
    std::string reason_;
    int restarts_ = 0, device_losses_ = 0;
    bool restart_when_idle_ = false, stopping_ = false;
    std::uint64_t next_id_ = 1;
    std::shared_ptr<Child> child_;
    std::map<std::string, std::shared_ptr<RequestStream>> streams_;
    nlohmann::json info_ = nlohmann::json::object(), stats_ = nlohmann::json::object();
    std::deque<std::string> stderr_tail_;
    std::string last_stderr_;
    Signal state_changed_;
    Signal wake_supervisor_;  // ends a backoff wait early (shutdown)
    int quick_deaths_ = 0;
    std::chrono::steady_clock::time_point next_attempt_{};
};

}  // namespace inkling::gateway
