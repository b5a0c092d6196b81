// The one seam between the engine's life (gateway/engines/engine_life.h, no I/O) and a process:
// start one, write to its stdin, end its input, kill it. Reads go the other way: whoever
// owns the link hands the engine's stdout bytes, stderr bytes and its exit to EngineLife
// (on_output, on_stderr, on_exit), in the order they happened.
//
// The gateway's link is a child process on pipes (gateway/engines/process_link.h); the scenario
// tests (tests/gateway/engines/engine_life_test.cpp) use a scripted fake.
#pragma once

#include <string>

namespace inkling::gateway {

class EngineLink {
public:
    virtual ~EngineLink() = default;
    // Starts a new engine. False, with `error` set, when none could be started (the binary
    // is missing, fork failed); no on_exit follows then.
    virtual bool spawn(std::string& error) = 0;
    // Queues bytes for the engine's stdin, in order; dropped once the engine is gone.
    virtual void write(std::string bytes) = 0;
    // EOF on the engine's stdin: it finishes what it has and exits 0.
    virtual void close_input() = 0;
    // SIGKILL: for an engine that answers nothing (a stopped process ignores the rest).
    virtual void kill() = 0;
    // The running engine's process id (0 when none).
    virtual long pid() const = 0;
};

// How an engine ended.
struct EngineExit {
    bool signaled = false;
    int status = 0;  // the exit status, or the signal number when `signaled`
    bool clean() const { return !signaled && status == 0; }
};

}  // namespace inkling::gateway
