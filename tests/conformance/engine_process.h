// An engine child on real pipes, seen from the client side: raw bytes out of its stdout
// are kept (for byte-level checks) and parsed with the protocol library's reader.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/frame_reader.h"

namespace conformance {

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
    std::optional<inkling::protocol::ReadItem> next(std::chrono::milliseconds timeout);
    // Reads until EOF or timeout; returns true at EOF.
    bool drain_to_eof(std::chrono::milliseconds timeout);

    // Waits for exit; the raw wait status, or nullopt on timeout (the child is then killed).
    std::optional<int> wait_exit(std::chrono::milliseconds timeout);

    const std::string& raw_stdout() const { return raw_; }
    std::string stderr_tail(std::size_t lines = 8) const;
    bool stdout_eof() const { return eof_; }

private:
    bool read_some(std::chrono::milliseconds timeout);

    pid_t pid_ = -1;
    int in_fd_ = -1;
    int out_fd_ = -1;
    bool eof_ = false;
    std::optional<int> status_;
    std::string stderr_path_;
    std::string raw_;
    inkling::protocol::FrameReader reader_{inkling::protocol::Direction::FromEngine};
};

}  // namespace conformance
