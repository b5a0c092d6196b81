// `inkling serve`: the thin adapter between the wire (stdin/stdout, protocol/) and the
// Scheduler. Binary stdio first; READY once the model is loaded, then an info STATS
// frame; between rounds it reads whatever frames have arrived, so STOP and CANCEL take
// effect within one token. EOF or SIGTERM: no new input, in-flight requests finish,
// exit 0.
//
// ServeLoop is that loop over any two descriptors, one turn at a time, so a test can feed
// it input between rounds in-process (tests/fuzz/serve_fuzz.cpp); serve_stdio drives it
// over stdin/stdout until it ends.
#pragma once

#include <set>
#include <string>

#include "engine/serve/scheduler.h"
#include "protocol/frame_source.h"
#include "protocol/frame_writer.h"

namespace inkling::serve {

// How long a turn may wait for input. The engine's defaults keep an idle engine from
// spinning and a frame written in pieces whole; a caller that hands over whole inputs
// itself (the fuzz target) sets both to 0 so a turn never waits.
struct LoopWaits {
    int idle_ms = 250;    // for the first byte while no request is in flight
    int stall_ms = 1000;  // for the rest of a frame in progress before the round goes on
};

class ServeLoop {
public:
    ServeLoop(Scheduler& scheduler, int in_fd, int out_fd, LoopWaits waits = {});

    // READY and the info STATS frame: the loop's first output.
    void greet();
    // One turn: read the frames that have arrived (none once `stop_reading`, SIGTERM's
    // flag, has been seen), answer each, then run one round if a request is in flight.
    // False once the input has ended (or reading stopped) and no request is left, or
    // once the output failed.
    bool turn(bool stop_reading = false);
    // 0, or 1 when a write to the output failed.
    int exit_status() const { return writer_.error().empty() ? 0 : 1; }

private:
    // The scheduler's frames on their way to the writer. It keeps the ids in flight as the
    // client sees them (PROTOCOL.md §7.1): from ACCEPT to DONE or an ERROR other than
    // DUPLICATE_ID, which names a running request without ending it.
    class Sink : public FrameSink {
    public:
        explicit Sink(protocol::FrameWriter& writer) : writer_(writer) {}
        void send(const protocol::Frame& frame) override;
        bool in_flight(const std::string& id) const { return in_flight_.count(id) != 0; }

    private:
        protocol::FrameWriter& writer_;
        std::set<std::string> in_flight_;
    };

    void read_and_answer();
    void answer_problem(const protocol::Problem& p);

    Scheduler& scheduler_;
    protocol::FrameWriter writer_;
    Sink out_{writer_};
    protocol::FrameSource in_;
    LoopWaits waits_;
    bool draining_ = false;
};

// Runs until EOF/SIGTERM and drained. Returns the process exit status.
int serve_stdio(Scheduler& scheduler);

}  // namespace inkling::serve
