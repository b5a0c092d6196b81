// Reads frames from a file descriptor (a pipe): poll with a timeout, read what is there,
// hand out frames. The engine's serve loop and every client use this one piece.
//
//   FrameSource in(STDIN_FILENO, Direction::ToEngine);
//   while (in.pump(busy ? 0 : -1) != FrameSource::Pump::Eof || in.has_items())
//       while (auto item = in.next()) …
#pragma once

#include <optional>

#include "protocol/frame_reader.h"

namespace inkling::protocol {

class FrameSource {
public:
    FrameSource(int fd, Direction direction, const Limits& limits = kDefaultLimits)
        : fd_(fd), reader_(direction, limits) {}

    enum class Pump { Data, Timeout, Eof };
    // Waits up to timeout_ms (-1: no limit) for bytes and feeds them to the reader.
    // Eof is sticky; a frame cut short by it becomes a BAD_FRAME problem.
    Pump pump(int timeout_ms);
    std::optional<ReadItem> next() { return reader_.next(); }
    bool eof() const { return eof_; }
    // Inside a frame: its header or payload is only partly in (the rest is on its way).
    bool mid_frame() const { return reader_.mid_frame(); }
    int fd() const { return fd_; }

private:
    int fd_;
    FrameReader reader_;
    bool eof_ = false;
};

}  // namespace inkling::protocol
