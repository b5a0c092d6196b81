// An engine child on real pipes, seen from the client side (the conformance suite, coli's
// private engine): raw bytes out of its stdout are kept (for byte-level checks) and
// parsed with the protocol library's reader; its stderr goes to a file for diagnostics.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/child_process.h"
#include "protocol/frame_reader.h"

namespace inkling::protocol {

class EngineProcess {
public:
    // Starts argv[0] with argv; stderr goes to `stderr_path` (kept for diagnostics).
    EngineProcess(const std::vector<std::string>& argv, std::string stderr_path);
    ~EngineProcess();
    EngineProcess(const EngineProcess&) = delete;
    EngineProcess& operator=(const EngineProcess&) = delete;

    bool write(std::string_view bytes);
    void close_stdin();
    void signal(int sig);

    // The next frame or problem, waiting up to `timeout`; nullopt on timeout or EOF.
    std::optional<ReadItem> next(std::chrono::milliseconds timeout);
    // Reads until EOF or timeout; returns true at EOF.
    bool drain_to_eof(std::chrono::milliseconds timeout);

    // Waits for exit; its status, or nullopt on timeout (the child is then killed).
    std::optional<platform::ExitStatus> wait_exit(std::chrono::milliseconds timeout);

    const std::string& raw_stdout() const { return raw_; }
    void keep_raw_stdout(bool keep) { keep_raw_ = keep; }  // off for long sessions
    std::string stderr_tail(std::size_t lines = 8) const;
    bool stdout_eof() const { return eof_; }
    long pid() const { return child_.pid(); }
    int stdout_fd() const { return child_.stdout_fd(); }

private:
    bool read_some(std::chrono::milliseconds timeout);

    std::string stderr_path_;
    platform::ChildProcess child_;
    bool eof_ = false;
    std::string raw_;
    bool keep_raw_ = true;
    FrameReader reader_{Direction::FromEngine};
};

}  // namespace inkling::protocol
