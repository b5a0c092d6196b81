#include "engine/serve/serve_loop.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "platform/stop_request.h"

namespace inkling::serve {
namespace {

volatile std::sig_atomic_t g_terminate = 0;
void on_terminate() { g_terminate = 1; }

std::string stats_text(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void dispatch(Scheduler& scheduler, const protocol::Frame& frame, FrameSink& out) {
    if (const auto* s = std::get_if<protocol::Submit>(&frame)) scheduler.submit(*s, out);
    else if (const auto* s = std::get_if<protocol::Stop>(&frame)) scheduler.stop(s->id, out);
    else if (const auto* c = std::get_if<protocol::Cancel>(&frame)) scheduler.cancel(c->id, out);
    else if (std::holds_alternative<protocol::StatsRequest>(frame)) out.send(protocol::Stats{stats_text(scheduler.stats())});
}

// The request a client frame names ("0" for STATS).
std::string frame_id(const protocol::Frame& frame) {
    if (const auto* s = std::get_if<protocol::Submit>(&frame)) return s->id;
    if (const auto* s = std::get_if<protocol::Stop>(&frame)) return s->id;
    if (const auto* c = std::get_if<protocol::Cancel>(&frame)) return c->id;
    return "0";
}

}  // namespace

void ServeLoop::Sink::send(const protocol::Frame& frame) {
    if (const auto* a = std::get_if<protocol::Accept>(&frame)) in_flight_.insert(a->id);
    else if (const auto* d = std::get_if<protocol::Done>(&frame)) in_flight_.erase(d->id);
    else if (const auto* e = std::get_if<protocol::Error>(&frame); e && e->code != protocol::ErrorCode::DuplicateId)
        in_flight_.erase(e->id);
    writer_.write(frame);
}

ServeLoop::ServeLoop(Scheduler& scheduler, int in_fd, int out_fd, LoopWaits waits)
    : scheduler_(scheduler), writer_(out_fd), in_(in_fd, protocol::Direction::ToEngine), waits_(waits) {}

void ServeLoop::greet() {
    const std::string info = stats_text(scheduler_.info());
    writer_.write(protocol::Ready{});
    out_.send(protocol::Stats{info});
    std::fprintf(stderr, "[serve] ready: %s\n", info.c_str());
}

// Every malformed frame gets one ERROR (PROTOCOL.md §10). One that names a request in
// flight is answered with id 0: an ERROR with that id would end the request for the client
// while the engine goes on with it (§6.6).
void ServeLoop::answer_problem(const protocol::Problem& p) {
    std::fprintf(stderr, "[serve] id=%s %s: %s\n", p.id.c_str(), std::string(protocol::to_string(p.code)).c_str(),
                 p.detail.c_str());
    if (out_.in_flight(p.id))
        out_.send(protocol::Error{std::string(protocol::kUnknownId), p.code,
                                  "a frame naming " + p.id + ", which is in flight: " + p.detail});
    else
        out_.send(protocol::Error{p.id, p.code, p.detail});
}

void ServeLoop::read_and_answer() {
    auto pumped = in_.pump(scheduler_.busy() ? 0 : waits_.idle_ms);
    // A frame in progress is read to its end before the round (a 16 MiB SUBMIT is 256
    // pipe-fulls), and so is whatever follows it that is already there: a CANCEL or STOP
    // written behind a big SUBMIT takes effect before the next token. A writer that stops
    // mid-frame for stall_ms lets the round go on.
    for (int stalled_ms = 0; pumped == protocol::FrameSource::Pump::Data;) {
        const int wait_ms = in_.mid_frame() ? std::min(10, waits_.stall_ms - stalled_ms) : 0;
        pumped = in_.pump(std::max(wait_ms, 0));
        if (pumped == protocol::FrameSource::Pump::Data) {
            stalled_ms = 0;
        } else if (pumped == protocol::FrameSource::Pump::Timeout && wait_ms > 0) {
            stalled_ms += wait_ms;
            pumped = protocol::FrameSource::Pump::Data;
        }
    }
    while (auto item = in_.next()) {
        if (const auto* p = std::get_if<protocol::Problem>(&*item)) {
            answer_problem(*p);
            continue;
        }
        const auto& frame = std::get<protocol::Frame>(*item);
        try {
            dispatch(scheduler_, frame, out_);
        } catch (const std::exception& e) {
            // The scheduler answers every input itself; this is the last guard, so one
            // frame never ends the process.
            const std::string id = frame_id(frame);
            std::fprintf(stderr, "[serve] id=%s internal error: %s\n", id.c_str(), e.what());
            scheduler_.abort(id, e.what(), out_);
        }
    }
    if (pumped == protocol::FrameSource::Pump::Eof) {
        std::fprintf(stderr, "[serve] input closed: finishing the requests in flight\n");
        draining_ = true;
    }
}

bool ServeLoop::turn(bool stop_reading) {
    if (!writer_.error().empty()) {
        std::fprintf(stderr, "[serve] output closed (%s): exiting\n", writer_.error().c_str());
        return false;
    }
    if (stop_reading && !draining_) {
        std::fprintf(stderr, "[serve] SIGTERM: finishing the requests in flight\n");
        draining_ = true;
    }
    if (!draining_) read_and_answer();
    if (!scheduler_.busy()) return !draining_;
    try {
        scheduler_.run_round(out_);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "[serve] internal error in a round: %s\n", e.what());
        scheduler_.fail_all(e.what(), out_);
    }
    return true;
}

int serve_stdio(Scheduler& scheduler) {
    // SIGTERM (Windows: CTRL_BREAK/CTRL_C/CTRL_CLOSE); the wait for input returns at once.
    platform::on_terminate_request(on_terminate);

    ServeLoop loop(scheduler, STDIN_FILENO, STDOUT_FILENO);
    loop.greet();
    while (loop.turn(g_terminate != 0)) {
    }
    return loop.exit_status();
}

}  // namespace inkling::serve
