#include "protocol/frame_writer.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocol/frame_encode.h"

namespace inkling::protocol {

bool FrameWriter::write(const Frame& frame) { return write_raw(encode(frame)); }

bool FrameWriter::write_raw(std::string_view bytes) {
    std::lock_guard lock(mutex_);
    return write_locked(bytes);
}

bool FrameWriter::write_locked(std::string_view bytes) {
    if (!error_.empty()) return false;
    while (!bytes.empty()) {
        ssize_t n = ::write(fd_, bytes.data(), bytes.size());
        if (n > 0) {
            bytes.remove_prefix(static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{fd_, POLLOUT, 0};
            ::poll(&p, 1, -1);
            continue;
        }
        error_ = n == 0 ? "write returned 0" : std::strerror(errno);
        if (n < 0 && errno == EPIPE) error_ = "peer closed the pipe (EPIPE)";
        return false;
    }
    return true;
}

}  // namespace inkling::protocol
