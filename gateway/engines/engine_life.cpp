#include "gateway/engines/engine_life.h"

#include <algorithm>
#include <cstdio>

#include "gateway/metrics.h"
#include "protocol/fields.h"
#include "protocol/frame_encode.h"

namespace inkling::gateway {
namespace {

// A STATS/EVENT object's "kind", or "" when it has none of type string.
std::string kind_of(const nlohmann::json& j) {
    if (!j.is_object()) return {};
    auto it = j.find("kind");
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string seconds_text(EngineLife::ms d) { return protocol::format_fixed(static_cast<double>(d.count()) / 1000.0, 1) + " s"; }

// True while `head` could still be the start of `want` (or is all of it).
bool opens_with(std::string_view head, std::string_view want) {
    const std::size_t n = std::min(head.size(), want.size());
    return head.substr(0, n) == want.substr(0, n);
}

}  // namespace

EngineLife::EngineLife(EngineLink& link, Options options, Metrics& metrics)
    : link_(link), o_(options), metrics_(metrics), backoff_(options.backoff_first) {}

const char* EngineLife::state_name(State s) {
    switch (s) {
    case State::Starting: return "starting";
    case State::Ready: return "ready";
    case State::Draining: return "draining";
    case State::Unresponsive: return "unresponsive";
    case State::Dead: return "dead";
    case State::Restarting: return "restarting";
    case State::Failed: return "failed";
    case State::Stopped: return "stopped";
    }
    return "?";
}

void EngineLife::say(const std::string& line) const {
    if (log) log(line);
    else std::fprintf(stderr, "%s\n", line.c_str());
}

void EngineLife::set_state(State s, std::string reason) {
    if (s != state_ || reason != reason_)
        say(std::string("[engine] ") + state_name(state_) + " -> " + state_name(s) + (reason.empty() ? "" : ": ") + reason);
    state_ = s;
    reason_ = std::move(reason);
    if (on_state_change) on_state_change();
}

void EngineLife::start(Time now) {
    if (started_) return;
    started_ = true;
    set_state(State::Starting, "");
    spawn(now);
}

void EngineLife::reload(Time now) {
    now_ = std::max(now_, now);
    if (!started_) return start(now);
    if (state_ != State::Stopped) return;
    stopping_ = false;
    stop_until_.reset();
    quick_deaths_ = 0;
    backoff_ = o_.backoff_first;
    set_state(State::Starting, "");
    spawn(now);
}

void EngineLife::spawn(Time now) {
    next_attempt_.reset();
    std::string error;
    if (!link_.spawn(error)) {
        // Nothing ran: the same as an engine that died before READY.
        ++restarts_;
        metrics_.engine_restarts.inc();
        schedule_after_death(now, "could not be started: " + error, /*quick=*/true);
        return;
    }
    engine_.emplace();
    engine_->started = engine_->last_progress = engine_->last_byte = now;
    say("[engine] started pid " + std::to_string(link_.pid()));
    // The reason of the last death stays visible until the new engine is ready.
    set_state(State::Starting, reason_);
}

void EngineLife::schedule_after_death(Time now, const std::string& why, bool quick) {
    ms delay{0};
    if (quick) {
        ++quick_deaths_;
        delay = backoff_;
        backoff_ = std::min(backoff_ * 2, o_.backoff_max);
    } else {
        quick_deaths_ = 0;
        backoff_ = o_.backoff_first;
    }
    next_attempt_ = now + delay;
    const std::string when = delay.count() > 0 ? "; next attempt in " + seconds_text(delay) : "; restarting now";
    if (quick_deaths_ >= o_.crash_loop_limit)
        set_state(State::Failed, "crash loop: " + std::to_string(quick_deaths_) + " deaths in a row before or within " +
                                     seconds_text(o_.settle) + " of READY; the last: engine " + why + when);
    else
        set_state(State::Restarting, "engine " + why + when);
}

void EngineLife::on_exit(Time now, EngineExit exit) {
    now_ = std::max(now_, now);
    if (!engine_) return;
    if (!stderr_line_.empty() || stderr_cut_) end_stderr_line();  // its last words, unterminated
    Engine e = std::move(*engine_);
    engine_.reset();
    std::string why = exit.signaled ? "killed by signal " + std::to_string(exit.status)
                                    : "exited with status " + std::to_string(exit.status);
    if (!e.unresponsive.empty()) why = e.unresponsive + ", " + why;
    if (!e.last_stderr.empty()) why += " (its last stderr line: " + e.last_stderr + ")";
    // A planned end: EOF after a drain, or the drain's deadline, or a shutdown.
    const bool planned = e.killed_planned || (exit.clean() && (state_ == State::Draining || stopping_));
    const bool had_work = !sinks_.empty();
    for (auto& [id, sink] : sinks_) sink->push(EngineDied{sink->accepted, why});
    sinks_.clear();
    drain_until_.reset();
    set_state(State::Dead, "engine " + why);
    if (stopping_) {
        set_state(State::Stopped, "");
        return;
    }
    ++restarts_;
    metrics_.engine_restarts.inc();
    // Deaths while requests ran are blamed on the work (see the header), never a crash loop.
    const bool quick = !planned && (!e.ready || (now - e.ready_at < o_.settle && !had_work));
    schedule_after_death(now, why, quick);
}

double EngineLife::seconds_to_next_attempt(Time now) const {
    if ((state_ != State::Failed && state_ != State::Restarting) || !next_attempt_) return 0;
    return std::max(0.0, std::chrono::duration<double>(*next_attempt_ - now).count());
}

void EngineLife::on_output(Time now, std::string_view bytes) {
    now_ = std::max(now_, now);
    if (!engine_ || engine_->broken || bytes.empty()) return;
    Engine& e = *engine_;
    e.last_byte = now;
    if (e.ping_asked) {
        e.ping_asked.reset();
        e.next_ping = now + o_.ping;
    }
    // The first bytes must open a frame allowed before READY: the sentinel itself, or an
    // EVENT (load progress). Anything else is a broken engine (a stray printf on stdout).
    if (!e.ready && e.head.size() < protocol::kReadySentinel.size()) {
        e.head.append(bytes.substr(0, protocol::kReadySentinel.size() - e.head.size()));
        if (!opens_with(e.head, protocol::kReadySentinel) && !opens_with(e.head, "EVENT ")) {
            say("[engine] stdout does not start with the READY sentinel (or a load EVENT): killing it");
            e.broken = true;
            link_.kill();
            return;
        }
    }
    e.reader.feed(bytes);
    while (auto item = e.reader.next()) {
        if (const auto* p = std::get_if<protocol::Problem>(&*item)) {
            // Fail closed: a desynchronised stream is never read further.
            say("[engine] malformed frame from the engine (" + p->detail + "): killing it");
            e.broken = true;
            link_.kill();
            return;
        }
        try {
            on_frame(now, std::get<protocol::Frame>(*item));
        } catch (const std::exception& ex) {
            // Whatever the engine sent, the supervisor goes on.
            say(std::string("[engine] protocol error handling a frame (ignored): ") + ex.what());
        }
        if (e.broken) return;
    }
}

void EngineLife::route(const std::string& id, EngineEvent ev, bool final) {
    auto it = sinks_.find(id);
    if (it == sinks_.end()) return;  // e.g. the answer to a CANCEL of a finished id
    if (std::holds_alternative<protocol::Accept>(ev)) it->second->accepted = true;
    it->second->push(std::move(ev));
    if (final) sinks_.erase(it);
}

void EngineLife::on_frame(Time now, const protocol::Frame& frame) {
    Engine& e = *engine_;
    if (!e.ready && !std::holds_alternative<protocol::Ready>(frame) && !std::holds_alternative<protocol::Event>(frame)) {
        say("[engine] a frame other than EVENT before READY: killing it");
        e.broken = true;
        link_.kill();
        return;
    }
    if (std::holds_alternative<protocol::Ready>(frame)) {
        if (e.ready) return;
        e.ready = true;
        e.ready_at = now;
        e.next_ping = now + o_.ping;
        load_progress_ = nlohmann::json::object();
        if (!stopping_) set_state(State::Ready, "");
        return;
    }
    if (const auto* a = std::get_if<protocol::Accept>(&frame)) route(a->id, *a, false);
    else if (const auto* d = std::get_if<protocol::Data>(&frame)) route(d->id, *d, false);
    else if (const auto* d = std::get_if<protocol::Done>(&frame)) route(d->id, *d, true);
    else if (const auto* er = std::get_if<protocol::Error>(&frame)) {
        if (er->id == protocol::kUnknownId) say("[engine] ERROR 0 " + er->detail);
        route(er->id, *er, true);
    } else if (const auto* s = std::get_if<protocol::Stats>(&frame)) {
        auto j = nlohmann::json::parse(s->json, nullptr, false);
        if (!j.is_object()) {
            say("[engine] protocol error: a STATS payload is not a JSON object (ignored): " + protocol::printable(s->json, 200));
            return;
        }
        (kind_of(j) == "info" ? info_ : stats_) = std::move(j);
    } else if (const auto* ev = std::get_if<protocol::Event>(&frame)) {
        on_event(now, nlohmann::json::parse(ev->json, nullptr, false));
    }
    close_if_drained();
}

void EngineLife::on_event(Time now, const nlohmann::json& j) {
    Engine& e = *engine_;
    const std::string kind = kind_of(j);
    if (kind == "load_progress") {
        // A loading engine that makes progress is alive, however long the load takes.
        if (!e.ready) {
            e.last_progress = now;
            load_progress_ = j;
        }
        return;
    }
    say("[engine] EVENT " + protocol::printable(j.is_discarded() ? std::string("(not JSON)") : j.dump(), 400));
    if (kind.empty()) say("[engine] protocol error: an EVENT without a string \"kind\" (ignored)");
    if (kind != "device_lost" && kind != "restart_advised") return;
    if (kind == "device_lost") {
        ++device_losses_;
        metrics_.device_losses.inc();
    }
    // Restart to get the device back, without starving on a busy gateway: admit nothing
    // new, let what runs finish (bounded), then restart.
    if (state_ != State::Ready || stopping_) return;
    drain_until_ = now + o_.drain_deadline;
    set_state(State::Draining, kind + ": restarting once the " + std::to_string(sinks_.size()) +
                                   " request(s) in flight finish (at most " + seconds_text(o_.drain_deadline) + ")");
    close_if_drained();
}

void EngineLife::close_input() {
    if (!engine_ || engine_->input_closed) return;
    engine_->input_closed = true;
    engine_->closed_at = now_;
    link_.close_input();
}

void EngineLife::close_if_drained() {
    if (state_ == State::Draining && sinks_.empty() && engine_ && !engine_->input_closed) {
        say("[engine] drained: ending its input");
        close_input();
    }
}

void EngineLife::kill_unresponsive(std::string why) {
    Engine& e = *engine_;
    say("[engine] pid " + std::to_string(link_.pid()) + " " + why + ": killing it");
    e.unresponsive = why;
    set_state(State::Unresponsive, why);
    link_.kill();
}

void EngineLife::tick(Time now) {
    now_ = std::max(now_, now);
    if (!engine_) {
        if (!stopping_ && next_attempt_ && now >= *next_attempt_) spawn(now);
        return;
    }
    Engine& e = *engine_;
    if (e.broken || e.killed_planned || !e.unresponsive.empty()) return;  // killed: its exit comes next
    if (stopping_) {
        if (stop_until_ && now >= *stop_until_) {
            say("[engine] still running " + seconds_text(o_.stop_deadline) + " after its input ended: killing it");
            e.killed_planned = true;
            link_.kill();
        }
        return;
    }
    if (!e.ready) {
        if (now >= e.last_progress + o_.start_deadline)
            kill_unresponsive("unresponsive: no READY and no load progress within " + seconds_text(o_.start_deadline));
        return;
    }
    if (e.input_closed) {
        // Drained and told to end: an engine that does not exit is killed (still planned).
        if (now >= e.closed_at + o_.deadline) {
            say("[engine] did not exit " + seconds_text(o_.deadline) + " after its input ended: killing it");
            e.killed_planned = true;
            link_.kill();
        }
        return;
    }
    if (drain_until_ && now >= *drain_until_) {
        say("[engine] the drain deadline passed with " + std::to_string(sinks_.size()) + " request(s) in flight: killing it");
        e.killed_planned = true;
        link_.kill();
        return;
    }
    if (e.ping_asked) {
        if (now >= *e.ping_asked + o_.deadline)
            kill_unresponsive("unresponsive: no answer to STATS within " + seconds_text(o_.deadline));
    } else if (now >= e.next_ping) {
        e.ping_asked = now;
        send(protocol::StatsRequest{});
    }
}

EngineLife::Time EngineLife::next_tick() const {
    constexpr Time never = Time::max();
    if (!engine_) return !stopping_ && next_attempt_ ? *next_attempt_ : never;
    const Engine& e = *engine_;
    if (e.broken || e.killed_planned || !e.unresponsive.empty()) return never;
    if (stopping_) return stop_until_ ? *stop_until_ : never;
    if (!e.ready) return e.last_progress + o_.start_deadline;
    if (e.input_closed) return e.closed_at + o_.deadline;
    Time t = e.ping_asked ? *e.ping_asked + o_.deadline : e.next_ping;
    if (drain_until_) t = std::min(t, *drain_until_);
    return t;
}

void EngineLife::shutdown(Time now) {
    now_ = std::max(now_, now);
    if (stopping_) return;
    stopping_ = true;
    next_attempt_.reset();
    if (!engine_) {
        set_state(State::Stopped, "");
        return;
    }
    stop_until_ = now + o_.stop_deadline;
    close_input();  // EOF: the engine finishes its requests and exits 0
    if (on_state_change) on_state_change();
}

void EngineLife::send(const protocol::Frame& frame) {
    if (!engine_ || engine_->input_closed || engine_->broken) return;
    link_.write(protocol::encode(frame));
}

std::string EngineLife::submit(protocol::Submit request, std::shared_ptr<RequestSink> sink) {
    request.id = "g" + std::to_string(next_id_++);
    if (!admitting() || !engine_) {
        // Only a caller that did not wait for admitting() gets here: an explicit end, never a hang.
        sink->push(EngineDied{false, std::string("the engine is ") + state_name(state_), false});
        return request.id;
    }
    sinks_[request.id] = std::move(sink);
    send(request);
    return request.id;
}

void EngineLife::stop(const std::string& id) {
    if (sinks_.count(id)) send(protocol::Stop{id});
}

void EngineLife::cancel(const std::string& id) {
    if (sinks_.count(id)) send(protocol::Cancel{id});
}

void EngineLife::release(const std::string& id) {
    sinks_.erase(id);
    close_if_drained();
}

void EngineLife::request_stats() { send(protocol::StatsRequest{}); }

void EngineLife::kill_engine() {
    if (engine_) link_.kill();
}

// Line by line: forwarded to the log as "[engine PID] …", the last kStderrTailLines lines
// (each cut to kStderrLineBytes) kept for /v1/stats, the last non-empty one explains a
// death. Memory stays bounded whatever the engine writes.
void EngineLife::on_stderr(std::string_view bytes) {
    for (const char ch : bytes) {
        if (ch == '\n') {
            end_stderr_line();
        } else if (stderr_line_.size() < kStderrLineBytes) {
            // NUL and ESC would confuse terminals; the JSON writer replaces invalid UTF-8.
            stderr_line_ += (ch == '\0' || ch == '\x1b') ? '?' : ch;
        } else {
            stderr_cut_ = true;
        }
    }
}

void EngineLife::end_stderr_line() {
    std::string line = std::move(stderr_line_);
    stderr_line_.clear();
    if (stderr_cut_) line += " [...]";
    stderr_cut_ = false;
    say("[engine " + std::to_string(pid()) + "] " + line);
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
        if (engine_) engine_->last_stderr = line;
        last_stderr_ = line;
    }
    stderr_tail_.push_back(std::move(line));
    while (stderr_tail_.size() > kStderrTailLines) stderr_tail_.pop_front();
}

}  // namespace inkling::gateway
