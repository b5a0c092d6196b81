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

}  // namespace

int serve_stdio(Scheduler& scheduler) {
    struct sigaction sa {};
    sa.sa_handler = on_terminate;
    sigaction(SIGTERM, &sa, nullptr);  // no SA_RESTART: poll() returns at once

    protocol::FrameWriter writer(STDOUT_FILENO);
    StdoutSink out(writer);
    writer.write(protocol::Ready{});
    out.send(protocol::Stats{scheduler.info().dump()});
    std::fprintf(stderr, "[serve] ready: %s\n", scheduler.info().dump().c_str());

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
            while (auto item = in.next()) {
                if (const auto* p = std::get_if<protocol::Problem>(&*item)) {
                    std::fprintf(stderr, "[serve] id=%s %s: %s\n", p->id.c_str(),
                                 std::string(protocol::to_string(p->code)).c_str(), p->detail.c_str());
                    out.send(protocol::Error{p->id, p->code, p->detail});
                    continue;
                }
                const auto& frame = std::get<protocol::Frame>(*item);
                if (const auto* s = std::get_if<protocol::Submit>(&frame)) scheduler.submit(*s, out);
                else if (const auto* s = std::get_if<protocol::Stop>(&frame)) scheduler.stop(s->id, out);
                else if (const auto* c = std::get_if<protocol::Cancel>(&frame)) scheduler.cancel(c->id, out);
                else if (std::holds_alternative<protocol::StatsRequest>(frame))
                    out.send(protocol::Stats{scheduler.stats().dump()});
            }
            if (pumped == protocol::FrameSource::Pump::Eof) {
                std::fprintf(stderr, "[serve] stdin closed: finishing the requests in flight\n");
                draining = true;
            }
        }
        if (scheduler.busy()) scheduler.run_round(out);
        else if (draining) break;
    }
    return writer.error().empty() ? 0 : 1;
}

}  // namespace inkling::serve
