#include "protocol/frame_source.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace inkling::protocol {

FrameSource::Pump FrameSource::pump(int timeout_ms) {
    if (eof_) return Pump::Eof;
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) return Pump::Timeout;
    if (ready == 0) return Pump::Timeout;
    char buf[65536];
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return Pump::Timeout;
    if (n <= 0) {
        eof_ = true;
        reader_.finish();
        return Pump::Eof;
    }
    reader_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    return Pump::Data;
}

}  // namespace inkling::protocol
