#include "platform/pipe_io.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace inkling::platform {

Wait wait_readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    return ready > 0 ? Wait::Ready : Wait::Timeout;  // EINTR (a signal): back to the caller at once
}

// A signal already interrupts poll (handlers are installed without SA_RESTART).
void interrupt_waits() noexcept {}

void forget_fd(int, int) {}

std::int64_t read_fd(int fd, void* buf, std::size_t bytes) {
    const ssize_t n = ::read(fd, buf, bytes);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return -2;
    return n;
}

bool write_all_fd(int fd, const void* buf, std::size_t bytes, std::string& error) {
    const char* p = static_cast<const char*>(buf);
    while (bytes > 0) {
        const ssize_t n = ::write(fd, p, bytes);
        if (n > 0) {
            p += n;
            bytes -= static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd w{fd, POLLOUT, 0};
            ::poll(&w, 1, -1);
            continue;
        }
        error = n == 0 ? "write returned 0" : std::strerror(errno);
        if (n < 0 && errno == EPIPE) error = "peer closed the pipe (EPIPE)";
        return false;
    }
    return true;
}

}  // namespace inkling::platform
