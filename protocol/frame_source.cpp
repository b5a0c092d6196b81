#include "protocol/frame_source.h"

#include "platform/pipe_io.h"

namespace inkling::protocol {

FrameSource::Pump FrameSource::pump(int timeout_ms) {
    if (eof_) return Pump::Eof;
    if (platform::wait_readable(fd_, timeout_ms) == platform::Wait::Timeout) return Pump::Timeout;
    char buf[65536];
    const std::int64_t n = platform::read_fd(fd_, buf, sizeof buf);
    if (n == -2) return Pump::Timeout;
    if (n <= 0) {
        eof_ = true;
        reader_.finish();
        return Pump::Eof;
    }
    reader_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    return Pump::Data;
}

}  // namespace inkling::protocol
