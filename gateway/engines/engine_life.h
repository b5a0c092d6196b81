// The engine's life as a state machine with no I/O: it starts engines through an
// EngineLink, reads their frames, routes each request's frames to its sink, watches
// liveness, drains and restarts. Time only moves through the calls (`now`), so the
// scenario tests (tests/gateway/engines/engine_life_test.cpp) drive it with a fake link and a
// stepped clock; the gateway's EngineSupervisor adds the pipes and timers.
//
//   Starting ──READY──▶ Ready ──device lost──▶ Draining ──idle or deadline──▶ Dead
//      │                  │ no answer to STATS                                 │
//      │ no READY and no  ▼                                                    ▼
//      │ load progress ─▶ Unresponsive ──(killed)──▶ Dead ──▶ Restarting ──▶ Starting …
//      └─ exits ─────────────────────────────────▶ Dead ──crash loop──▶ Failed ──▶ Starting …
//   shutdown(): EOF to the engine, it finishes what it has ──▶ Stopped
//
// - A crash loop is deaths before READY, or within `settle` of READY while no request was
//   in flight; each doubles the wait before the next start (backoff_first .. backoff_max)
//   and `crash_loop_limit` in a row say Failed (why, and when the next attempt is). It
//   never gives up. A death while requests run is blamed on the work, not on the engine:
//   the engine restarts at once, and a request that kills it every time (a poison request)
//   fails itself after its retries (the generation driver counts them) without ever
//   marking the engine failed.
// - Liveness: every `ping` a ready engine is asked for STATS; no byte within `deadline`
//   → Unresponsive, SIGKILL. A loading engine must send READY, or a load_progress EVENT
//   (the engine's --load-events), at least every `start_deadline`.
// - Draining (after a device_lost or restart_advised EVENT): no new request is admitted
//   (admitting() is false, the HTTP side waits), the ones in flight get `drain_deadline`
//   to finish, then the engine gets EOF (or SIGKILL at the deadline) and restarts, so a
//   steady stream of requests cannot starve the restart that gets the device back.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "gateway/engines/engine_link.h"
#include "protocol/frame_reader.h"
#include "protocol/frames.h"

namespace inkling::gateway {

class Metrics;

// The engine ended while the request was in flight; `accepted` says whether it had
// already been ACCEPTed (a request that was not can be retried on the next engine).
struct EngineDied {
    bool accepted = false;
    std::string reason;
    // The engine had the request when it ended (false: it was never sent, the engine was
    // not admitting). A request every engine dies with is a poison request.
    bool had_it = true;
};

using EngineEvent = std::variant<protocol::Accept, protocol::Data, protocol::Done, protocol::Error, EngineDied>;

// Where one request's frames go, in order (the HTTP side's RequestStream).
class RequestSink {
public:
    virtual ~RequestSink() = default;
    virtual void push(EngineEvent e) = 0;
    bool accepted = false;
};

class EngineLife {
public:
    using Clock = std::chrono::steady_clock;
    using Time = Clock::time_point;
    using ms = std::chrono::milliseconds;
    enum class State { Starting, Ready, Draining, Unresponsive, Dead, Restarting, Failed, Stopped };
    struct Options {
        ms backoff_first{250}, backoff_max{30000};  // waits before a start after a quick death
        ms settle{5000};                             // a death sooner than this after READY is quick
        int crash_loop_limit = 3;                    // quick deaths in a row → Failed (still retrying)
        ms ping{5000}, deadline{15000};              // the liveness watchdog of a ready engine
        ms start_deadline{600000};                   // READY or load progress at least this often
        ms drain_deadline{60000};                    // Draining: in-flight requests get this long
        ms stop_deadline{30000};                     // shutdown: EOF, then SIGKILL after this long
    };

    EngineLife(EngineLink& link, Options options, Metrics& metrics);
    const Options& options() const { return o_; }

    // ---- time and the link's reports -------------------------------------------------
    void start(Time now);
    // Runs whatever is due at `now` (a start after a backoff, a ping, a deadline).
    void tick(Time now);
    // When tick() next has something to do (Time::max() when nothing is pending).
    Time next_tick() const;
    void on_output(Time now, std::string_view bytes);  // the engine's stdout
    void on_stderr(std::string_view bytes);            // the engine's stderr
    void on_exit(Time now, EngineExit exit);           // once per started engine, after its output
    // Stops admitting requests; the engine finishes what it has and exits (Stopped).
    void shutdown(Time now);
    // After Stopped (a model unloaded for idleness or the memory budget): admits requests again
    // and starts an engine, as start() did; the counts (restarts, device losses) go on.
    void reload(Time now);
    bool stopping() const { return stopping_; }

    // ---- requests ------------------------------------------------------------------------
    bool admitting() const { return state_ == State::Ready && !stopping_; }
    // True once waiting cannot help: stopping, or a crash loop (Failed) between attempts.
    bool refusing() const { return stopping_ || state_ == State::Failed || state_ == State::Stopped; }
    // Sends SUBMIT under a fresh engine-side id (returned); `sink` gets its frames.
    std::string submit(protocol::Submit request, std::shared_ptr<RequestSink> sink);
    void stop(const std::string& id);
    void cancel(const std::string& id);
    void release(const std::string& id);  // the handler is done with this id
    void request_stats();
    void kill_engine();  // test hook and operator tool: SIGKILL now

    // ---- what /health, /v1/stats and /metrics show --------------------------------------
    State state() const { return state_; }
    static const char* state_name(State s);
    const std::string& reason() const { return reason_; }
    // Seconds until the next start while Restarting or Failed (0 otherwise).
    double seconds_to_next_attempt(Time now) const;
    int restarts() const { return restarts_; }
    int device_losses() const { return device_losses_; }
    long pid() const { return engine_ ? link_.pid() : 0; }
    std::size_t in_flight() const { return sinks_.size(); }
    const nlohmann::json& info() const { return info_; }
    const nlohmann::json& stats() const { return stats_; }
    const nlohmann::json& load_progress() const { return load_progress_; }  // the last one, {} once ready
    // The last lines engines wrote to stderr, oldest first, and the last non-empty one.
    const std::deque<std::string>& stderr_tail() const { return stderr_tail_; }
    const std::string& last_stderr() const { return last_stderr_; }
    static constexpr std::size_t kStderrTailLines = 50, kStderrLineBytes = 1024;

    // After every state change (the Asio side wakes its waiters there).
    std::function<void()> on_state_change;
    // Where the log lines go ("[engine] ready -> draining: …"); stderr unless replaced.
    std::function<void(const std::string&)> log;

private:
    // The engine now running (one at a time).
    struct Engine {
        Engine() : reader(protocol::Direction::FromEngine) {}
        protocol::FrameReader reader;
        std::string head;  // the first stdout bytes, until they are known to be a frame
        bool ready = false, input_closed = false, broken = false;
        Time started{}, ready_at{}, last_progress{}, last_byte{};
        std::optional<Time> ping_asked;  // a STATS request waiting for an answer
        Time next_ping{};
        Time closed_at{};           // when its input was closed
        std::string unresponsive;  // why the watchdog killed it
        std::string last_stderr;   // this engine's last non-empty stderr line
        bool killed_planned = false;  // killed at the end of a drain or a shutdown
    };

    void spawn(Time now);
    void schedule_after_death(Time now, const std::string& why, bool quick);
    void on_frame(Time now, const protocol::Frame& frame);
    void route(const std::string& id, EngineEvent e, bool final);
    void on_event(Time now, const nlohmann::json& j);
    void kill_unresponsive(std::string why);
    void close_input();
    void close_if_drained();
    void send(const protocol::Frame& frame);
    void set_state(State s, std::string reason);
    void end_stderr_line();
    void say(const std::string& line) const;

    EngineLink& link_;
    Options o_;
    Metrics& metrics_;
    State state_ = State::Stopped;
    std::string reason_;
    bool started_ = false, stopping_ = false;
    std::optional<Engine> engine_;
    std::map<std::string, std::shared_ptr<RequestSink>> sinks_;
    std::uint64_t next_id_ = 1;
    int restarts_ = 0, device_losses_ = 0, quick_deaths_ = 0;
    ms backoff_{0};
    std::optional<Time> next_attempt_;  // when the next engine starts (none running)
    std::optional<Time> drain_until_, stop_until_;
    Time now_{};  // the latest time any call brought (for calls that bring none)
    nlohmann::json info_ = nlohmann::json::object(), stats_ = nlohmann::json::object(),
                   load_progress_ = nlohmann::json::object();
    std::deque<std::string> stderr_tail_;
    std::string last_stderr_, stderr_line_;
    bool stderr_cut_ = false;
};

}  // namespace inkling::gateway
