#include "engine/serve/serve_loop.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "protocol/frame_source.h"
#include "protocol/frame_writer.h"

namespace inkling::serve {
namespace {

volatile std::sig_atomic_t g_terminate = 0;
void on_terminate(int) { g_terminate = 1; }

class StdoutSink : public FrameSink {
public:
    explicit StdoutSink(protocol::FrameWriter& w) : w_(w) {}
    void send(const protocol::Frame& frame) override { w_.write(frame); }

private:
    protocol::FrameWriter& w_;
};

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

int serve_stdio(Scheduler& scheduler) {
    struct sigaction sa {};
    sa.sa_handler = on_terminate;
    sigaction(SIGTERM, &sa, nullptr);  // no SA_RESTART: poll() returns at once

    protocol::FrameWriter writer(STDOUT_FILENO);
    StdoutSink out(writer);
    writer.write(protocol::Ready{});
    out.send(protocol::Stats{stats_text(scheduler.info())});
    std::fprintf(stderr, "[serve] ready: %s\n", stats_text(scheduler.info()).c_str());

    protocol::FrameSource in(STDIN_FILENO, protocol::Direction::ToEngine);
    bool draining = false;
    while (true) {
        if (!writer.error().empty()) {
            std::fprintf(stderr, "[serve] stdout closed (%s): exiting\n", writer.error().c_str());
            return 1;
        }
        if (g_terminate && !draining) {
            std::fprintf(stderr, "[serve] SIGTERM: finishing the requests in flight\n");
            draining = true;
        }
        if (!draining) {
            auto pumped = in.pump(scheduler.busy() ? 0 : 250);
            // A frame in progress is read to its end before the round (a 16 MiB SUBMIT is
            // 256 pipe-fulls), and so is whatever follows it that is already there: a
            // CANCEL or STOP written behind a big SUBMIT takes effect before the next token.
            // A writer that stops mid-frame for 1 s lets the round go on.
            for (int stalled_ms = 0; pumped == protocol::FrameSource::Pump::Data && stalled_ms < 1000;) {
                const bool partial = in.mid_frame();
                pumped = in.pump(partial ? 10 : 0);
                if (pumped == protocol::FrameSource::Pump::Data) {
                    stalled_ms = 0;
                } else if (pumped == protocol::FrameSource::Pump::Timeout && partial) {
                    stalled_ms += 10;
                    pumped = protocol::FrameSource::Pump::Data;
                }
            }
            while (auto item = in.next()) {
                if (const auto* p = std::get_if<protocol::Problem>(&*item)) {
                    std::fprintf(stderr, "[serve] id=%s %s: %s\n", p->id.c_str(),
                                 std::string(protocol::to_string(p->code)).c_str(), p->detail.c_str());
                    out.send(protocol::Error{p->id, p->code, p->detail});
                    continue;
                }
                const auto& frame = std::get<protocol::Frame>(*item);
                try {
                    dispatch(scheduler, frame, out);
                } catch (const std::exception& e) {
                    // The scheduler answers every input itself; this is the last guard, so
                    // one frame never ends the process.
                    const std::string id = frame_id(frame);
                    std::fprintf(stderr, "[serve] id=%s internal error: %s\n", id.c_str(), e.what());
                    scheduler.abort(id, e.what(), out);
                }
            }
            if (pumped == protocol::FrameSource::Pump::Eof) {
                std::fprintf(stderr, "[serve] stdin closed: finishing the requests in flight\n");
                draining = true;
            }
        }
        if (scheduler.busy()) {
            try {
                scheduler.run_round(out);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "[serve] internal error in a round: %s\n", e.what());
                scheduler.fail_all(e.what(), out);
            }
        }
        else if (draining) break;
    }
    return writer.error().empty() ? 0 : 1;
}

}  // namespace inkling::serve
