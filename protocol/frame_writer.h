// Writes whole frames to a file descriptor. One mutex per writer, so frames from several
// threads never interleave; short writes and EINTR are retried; a closed peer (EPIPE) is
// reported as an error.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "protocol/frames.h"

namespace inkling::protocol {

class FrameWriter {
public:
    explicit FrameWriter(int fd) : fd_(fd) {}

    // False once a write failed (peer gone); error() then says why. Later calls fail fast.
    bool write(const Frame& frame);
    bool write_raw(std::string_view bytes);
    const std::string& error() const { return error_; }

private:
    bool write_locked(std::string_view bytes);

    int fd_;
    std::mutex mutex_;
    std::string error_;
};

}  // namespace inkling::protocol
