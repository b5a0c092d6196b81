#include "gateway/engine_supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include "gateway/metrics.h"
#include "protocol/child_stdio.h"
#include "protocol/fields.h"
#include "protocol/frame_encode.h"
#include "protocol/frame_reader.h"

namespace inkling::gateway {

namespace bp = boost::process;
using Clock = std::chrono::steady_clock;

awaitable<std::optional<EngineEvent>> RequestStream::next(asio::steady_timer::time_point deadline) {
    if (events_.empty()) co_await signal_.wait(deadline);
    if (events_.empty()) co_return std::nullopt;
    EngineEvent e = std::move(events_.front());
    events_.pop_front();
    co_return e;
}

struct EngineSupervisor::Child {
    Child(asio::io_context& io, const std::vector<std::string>& argv)
        : in(io), out(io), err(io), wake_writer(io.get_executor()), stderr_closed(io.get_executor()),
          watchdog_wake(io.get_executor()) {
        std::vector<std::string> args(argv.begin() + 1, argv.end());
        // The engine gets its own process group: a Ctrl-C at the gateway's terminal drains
        // through the gateway (which then closes the engine's stdin) instead of killing it.
        // It inherits stdin, stdout and stderr only (Asio's sockets are not close-on-exec:
        // the listening one kept the port bound after the gateway died).
        process = bp::child(bp::exe = argv[0], bp::args = args, bp::std_in < in, bp::std_out > out, bp::std_err > err,
                            bp::extend::on_exec_setup = [](auto&) {
                                ::setpgid(0, 0);
                                protocol::close_on_exec_beyond_stdio();
                            });
    }
    bp::async_pipe in, out, err;
    bp::child process;
    std::deque<std::string> outbox;  // encoded frames waiting for the pipe
    Signal wake_writer;
    Signal stderr_closed;  // stderr_done became true
    bool stderr_done = false;
    bool dead = false;
    bool ready = false;
    Clock::time_point ready_at{};
    Clock::time_point started_at = Clock::now(), last_frame_at = Clock::now();
    std::string unresponsive;  // why the watchdog killed it ("" if it did not)
    Signal watchdog_wake;      // the engine died: the watchdog ends
    std::string last_stderr;  // this engine's last non-empty stderr line
};

EngineSupervisor::EngineSupervisor(asio::io_context& io, Options options, Metrics& metrics)
    : io_(io), options_(std::move(options)), metrics_(metrics), state_changed_(io.get_executor()),
      wake_supervisor_(io.get_executor()) {}

EngineSupervisor::~EngineSupervisor() {
    if (child_ && child_->process.valid() && child_->process.running()) {
        std::error_code ec;
        child_->process.terminate(ec);
    }
}

const char* EngineSupervisor::state_name(State s) {
    switch (s) {
    case State::Starting: return "starting";
    case State::Ready: return "ready";
    case State::Unresponsive: return "unresponsive";
    case State::Restarting: return "restarting";
    case State::Failed: return "failed";
    case State::Stopped: return "stopped";
    }
    return "?";
}

void EngineSupervisor::set_state(State s, std::string reason) {
    if (s != state_ || reason != reason_)
        std::fprintf(stderr, "[engine] %s -> %s%s%s\n", state_name(state_), state_name(s), reason.empty() ? "" : ": ",
                     reason.c_str());
    state_ = s;
    reason_ = std::move(reason);
    state_changed_.notify();
}

long EngineSupervisor::pid() const { return child_ && !child_->dead ? static_cast<long>(child_->process.id()) : 0; }

void EngineSupervisor::start() { asio::co_spawn(io_, supervise(), asio::detached); }

awaitable<void> EngineSupervisor::supervise() {
    // A crash loop is deaths before READY or within options_.settle of it; each one doubles
    // the wait before the next start (backoff_first .. backoff_max). An engine that served
    // for longer is restarted at once, however often that happens. It never gives up: a
    // crash loop only says "failed" (and why, and when the next attempt is) while it lasts.
    auto backoff = options_.backoff_first;
    while (!stopping_) {
        set_state(restarts_ == 0 ? State::Starting : State::Restarting, reason_);
        std::shared_ptr<Child> child;
        std::string why;
        bool was_ready = false, planned = false;
        Clock::time_point ready_at{};
        try {
            child = std::make_shared<Child>(io_, options_.argv);
        } catch (const std::exception& e) {
            why = std::string("could not be started: ") + e.what();
        }
        if (child) {
            child_ = child;
            std::fprintf(stderr, "[engine] started pid %ld: %s …\n", pid(), options_.argv[0].c_str());
            asio::co_spawn(io_, write_loop(child), asio::detached);
            asio::co_spawn(io_, stderr_loop(child), asio::detached);
            asio::co_spawn(io_, watchdog(child), asio::detached);
            bool read_failed = false;
            try {
                co_await read_loop(child);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "[engine] reading the engine failed: %s: killing it\n", e.what());
                read_failed = true;
            }
            if (read_failed) {
                std::error_code kec;
                child->process.terminate(kec);
            }

            // The engine is gone: reap it and tell every request still waiting.
            child->dead = true;
            child->wake_writer.notify();
            child->watchdog_wake.notify();
            std::error_code ec;
            child->process.wait(ec);
            // Its last words: stderr up to EOF (bounded: a grandchild may hold the pipe open).
            const auto words_deadline = Clock::now() + std::chrono::seconds(2);
            while (!child->stderr_done && Clock::now() < words_deadline) co_await child->stderr_closed.wait(words_deadline);
            const int code = child->process.exit_code();
            const int native = child->process.native_exit_code();
            why = WIFSIGNALED(native) ? "killed by signal " + std::to_string(WTERMSIG(native))
                                      : "exited with status " + std::to_string(code);
            if (!child->unresponsive.empty()) why = child->unresponsive + ", " + why;
            if (!child->last_stderr.empty()) why += " (its last stderr line: " + child->last_stderr + ")";
            const bool clean = !WIFSIGNALED(native) && code == 0;
            for (auto& [id, stream] : streams_) stream->push(EngineDied{stream->accepted, why});
            streams_.clear();
            was_ready = child->ready;
            ready_at = child->ready_at;
            // A clean exit we asked for (device lost → restart when idle) is not a crash.
            planned = clean && restart_when_idle_;
            restart_when_idle_ = false;
        }
        if (stopping_) break;
        ++restarts_;
        metrics_.engine_restarts.inc();
        const bool quick = !was_ready || Clock::now() - ready_at < options_.settle;
        std::chrono::milliseconds delay{0};
        if (planned) {
            quick_deaths_ = 0;
        } else if (quick) {
            ++quick_deaths_;
            delay = backoff;
            backoff = std::min(backoff * 2, options_.backoff_max);
        } else {
            quick_deaths_ = 0;
            backoff = options_.backoff_first;
        }
        next_attempt_ = Clock::now() + delay;
        const std::string when = delay.count() > 0 ? "; next attempt in " + protocol::format_fixed(delay.count() / 1000.0, 1) + " s"
                                                   : "; restarting now";
        if (quick_deaths_ >= options_.crash_loop_limit)
            set_state(State::Failed, "crash loop: " + std::to_string(quick_deaths_) + " deaths in a row before or within " +
                                         std::to_string(options_.settle.count()) + " s of READY; the last: engine " + why +
                                         when);
        else
            set_state(State::Restarting, "engine " + why + when);
        while (!stopping_ && Clock::now() < next_attempt_) co_await wake_supervisor_.wait(next_attempt_);
    }
    set_state(State::Stopped, "");
}

double EngineSupervisor::seconds_to_next_attempt() const {
    if (state_ != State::Failed && state_ != State::Restarting) return 0;
    return std::max(0.0, std::chrono::duration<double>(next_attempt_ - Clock::now()).count());
}

awaitable<void> EngineSupervisor::read_loop(std::shared_ptr<Child> child) {
    protocol::FrameReader reader(protocol::Direction::FromEngine);
    std::array<char, 65536> buf;
    bool first = true;
    while (true) {
        boost::system::error_code ec;
        std::size_t n = co_await child->out.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
        if (ec || n == 0) break;
        child->last_frame_at = Clock::now();  // any bytes: the engine is alive
        // The first bytes must be exactly the sentinel; anything else means a broken engine.
        if (first && std::string_view(buf.data(), std::min(n, protocol::kReadySentinel.size())) !=
                         protocol::kReadySentinel.substr(0, std::min(n, protocol::kReadySentinel.size()))) {
            std::fprintf(stderr, "[engine] stdout does not start with the READY sentinel: killing it\n");
            std::error_code kec;
            child->process.terminate(kec);
            break;
        }
        first = false;
        reader.feed(std::string_view(buf.data(), n));
        bool broken = false;
        while (auto item = reader.next()) {
            if (const auto* p = std::get_if<protocol::Problem>(&*item)) {
                // Fail closed: a desynchronised stream is never read further.
                std::fprintf(stderr, "[engine] malformed frame from the engine (%s): killing it\n", p->detail.c_str());
                std::error_code kec;
                child->process.terminate(kec);
                broken = true;
                break;
            }
            const auto& frame = std::get<protocol::Frame>(*item);
            if (std::holds_alternative<protocol::Ready>(frame)) {
                child->ready = true;
                child->ready_at = Clock::now();
                set_state(State::Ready, "");
                continue;
            }
            try {
                on_frame(frame);
            } catch (const std::exception& e) {
                // Whatever the engine sent, the supervisor goes on (an exception here once
                // ended supervise() silently, leaving a /health of 200 that nobody served).
                std::fprintf(stderr, "[engine] protocol error handling a frame (ignored): %s\n", e.what());
            }
        }
        if (broken) break;
    }
}

namespace {

// A STATS/EVENT object's "kind", or "" when it has none of type string.
std::string kind_of(const nlohmann::json& j) {
    if (!j.is_object()) return {};
    auto it = j.find("kind");
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

void EngineSupervisor::on_frame(const protocol::Frame& frame) {
    auto route = [&](const std::string& id, EngineEvent e, bool final) {
        auto it = streams_.find(id);
        if (it == streams_.end()) return;  // e.g. the answer to a CANCEL of a finished id
        if (std::holds_alternative<protocol::Accept>(e)) it->second->accepted = true;
        it->second->push(std::move(e));
        if (final) streams_.erase(it);
    };
    if (const auto* a = std::get_if<protocol::Accept>(&frame)) route(a->id, *a, false);
    else if (const auto* d = std::get_if<protocol::Data>(&frame)) route(d->id, *d, false);
    else if (const auto* d = std::get_if<protocol::Done>(&frame)) route(d->id, *d, true);
    else if (const auto* e = std::get_if<protocol::Error>(&frame)) {
        if (e->id == protocol::kUnknownId) std::fprintf(stderr, "[engine] ERROR 0 %s\n", e->detail.c_str());
        route(e->id, *e, true);
    } else if (const auto* s = std::get_if<protocol::Stats>(&frame)) {
        auto j = nlohmann::json::parse(s->json, nullptr, false);
        if (!j.is_object()) {
            std::fprintf(stderr, "[engine] protocol error: a STATS payload is not a JSON object (ignored): %s\n",
                         protocol::printable(s->json, 200).c_str());
            return;
        }
        (kind_of(j) == "info" ? info_ : stats_) = std::move(j);
    } else if (const auto* ev = std::get_if<protocol::Event>(&frame)) {
        auto j = nlohmann::json::parse(ev->json, nullptr, false);
        const std::string kind = kind_of(j);
        std::fprintf(stderr, "[engine] EVENT %s\n", protocol::printable(ev->json, 400).c_str());
        if (kind.empty()) std::fprintf(stderr, "[engine] protocol error: an EVENT without a string \"kind\" (ignored)\n");
        if (kind == "device_lost" || kind == "restart_advised") {
            if (kind == "device_lost") {
                ++device_losses_;
                metrics_.device_losses.inc();
            }
            // Restart at a quiet moment to get the device back.
            restart_when_idle_ = true;
        }
    }
    close_if_idle();
}

// A restart waiting for a quiet moment starts once no request is in flight: EOF on the
// engine's stdin lets it exit 0, and supervise() starts the next one.
void EngineSupervisor::close_if_idle() {
    if (restart_when_idle_ && streams_.empty() && child_ && child_->in.is_open()) {
        boost::system::error_code ec;
        child_->in.close(ec);
    }
}

// Liveness: a frozen engine (kill -STOP, a deadlock) answers nothing and closes nothing.
// Every `ping` the watchdog asks for STATS (the engine answers between rounds); no bytes at
// all within `deadline` of the ask, or no READY within `start_deadline` of the start, and
// the engine is killed (SIGKILL: a stopped process ignores the rest); supervise() restarts it.
awaitable<void> EngineSupervisor::watchdog(std::shared_ptr<Child> child) {
    auto kill_it = [&](std::string why) {
        std::fprintf(stderr, "[engine] pid %ld %s: killing it\n", static_cast<long>(child->process.id()), why.c_str());
        child->unresponsive = why;
        set_state(State::Unresponsive, why);
        ::kill(static_cast<pid_t>(child->process.id()), SIGKILL);
    };
    while (!child->dead) {
        if (!child->ready) {
            const auto limit = child->started_at + options_.start_deadline;
            if (Clock::now() >= limit) {
                kill_it("unresponsive: no READY within " + std::to_string(options_.start_deadline.count() / 1000) + " s");
                co_return;
            }
            co_await child->watchdog_wake.wait(std::min(limit, Clock::now() + options_.ping));
            continue;
        }
        co_await child->watchdog_wake.wait(Clock::now() + options_.ping);
        if (child->dead) co_return;
        const auto asked = Clock::now();
        send(protocol::StatsRequest{});
        const auto limit = asked + options_.deadline;
        while (!child->dead && child->last_frame_at < asked && Clock::now() < limit)
            co_await child->watchdog_wake.wait(std::min(limit, Clock::now() + std::chrono::milliseconds(100)));
        if (child->dead) co_return;
        if (child->last_frame_at < asked) {
            kill_it("unresponsive: no answer to STATS within " + protocol::format_fixed(options_.deadline.count() / 1000.0, 1) +
                    " s");
            co_return;
        }
    }
}

// The engine's stderr, line by line: forwarded to the gateway's log as "[engine PID] …",
// and the last kStderrTailLines lines (each cut to kStderrLineBytes) kept for /v1/stats;
// the last non-empty one explains a death in /health. Memory stays bounded whatever the
// engine writes.
awaitable<void> EngineSupervisor::stderr_loop(std::shared_ptr<Child> child) {
    const long pid = static_cast<long>(child->process.id());
    std::array<char, 16384> buf;
    std::string line;
    bool cut = false;  // the current line is over kStderrLineBytes: the rest is dropped
    auto end_line = [&] {
        if (cut) line += " [...]";
        std::fprintf(stderr, "[engine %ld] %s\n", pid, line.c_str());
        if (line.find_first_not_of(" \t\r") != std::string::npos) {
            child->last_stderr = line;
            last_stderr_ = line;
        }
        stderr_tail_.push_back(std::move(line));
        while (stderr_tail_.size() > kStderrTailLines) stderr_tail_.pop_front();
        line.clear();
        cut = false;
    };
    while (true) {
        boost::system::error_code ec;
        std::size_t n = co_await child->err.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
        if (ec || n == 0) break;
        for (std::size_t i = 0; i < n; ++i) {
            const char ch = buf[i];
            if (ch == '\n') {
                end_line();
            } else if (line.size() < kStderrLineBytes) {
                // Printable text for logs and JSON: control bytes and invalid UTF-8 are
                // replaced later by the JSON writer; NUL and ESC would confuse terminals.
                line += (ch == '\0' || ch == '\x1b') ? '?' : ch;
            } else {
                cut = true;
            }
        }
    }
    if (!line.empty() || cut) end_line();
    child->stderr_done = true;
    child->stderr_closed.notify();
}

awaitable<void> EngineSupervisor::write_loop(std::shared_ptr<Child> child) {
    while (!child->dead) {
        if (child->outbox.empty()) {
            co_await child->wake_writer.wait();
            continue;
        }
        std::string bytes = std::move(child->outbox.front());
        child->outbox.pop_front();
        boost::system::error_code ec;
        co_await asio::async_write(child->in, asio::buffer(bytes), asio::redirect_error(use_awaitable, ec));
        if (ec) break;  // the reader sees the death and handles it
    }
}

void EngineSupervisor::send(const protocol::Frame& frame) {
    if (!child_ || child_->dead || !child_->in.is_open()) return;
    child_->outbox.push_back(protocol::encode(frame));
    child_->wake_writer.notify();
}

awaitable<bool> EngineSupervisor::wait_ready(asio::steady_timer::time_point deadline) {
    while (state_ != State::Ready) {
        if (state_ == State::Failed || state_ == State::Stopped || stopping_) co_return false;
        if (asio::steady_timer::clock_type::now() >= deadline) co_return false;
        co_await state_changed_.wait(deadline);
    }
    co_return true;
}

std::shared_ptr<RequestStream> EngineSupervisor::submit(protocol::Submit request) {
    request.id = "g" + std::to_string(next_id_++);
    auto stream = std::make_shared<RequestStream>(io_.get_executor(), request.id);
    streams_[request.id] = stream;
    send(request);
    return stream;
}

void EngineSupervisor::stop(const std::string& id) {
    if (streams_.count(id)) send(protocol::Stop{id});
}
void EngineSupervisor::cancel(const std::string& id) {
    if (streams_.count(id)) send(protocol::Cancel{id});
}
void EngineSupervisor::release(const std::string& id) {
    streams_.erase(id);
    close_if_idle();
}
void EngineSupervisor::request_stats() { send(protocol::StatsRequest{}); }

void EngineSupervisor::kill_engine() {
    if (child_ && !child_->dead) ::kill(static_cast<pid_t>(child_->process.id()), SIGKILL);
}

awaitable<void> EngineSupervisor::shutdown() {
    stopping_ = true;
    state_changed_.notify();
    wake_supervisor_.notify();
    if (child_ && !child_->dead) {
        boost::system::error_code ec;
        child_->in.close(ec);  // EOF: the engine finishes its requests and exits 0
        asio::steady_timer t(io_);
        for (int i = 0; i < 600 && !child_->dead; ++i) {
            t.expires_after(std::chrono::milliseconds(50));
            co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
        }
        if (!child_->dead) kill_engine();
    }
}

}  // namespace inkling::gateway
