#include "gateway/http/hangup_watch.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string_view>

namespace inkling::gateway {

namespace {

// A reset (or another error) on the socket: POLLERR, or POLLHUP, which a TCP socket reports
// only once it is closed in both directions; a FIN alone sets neither.
bool socket_failed(int fd) {
    pollfd p{fd, 0, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

// Writes an interim response without waiting (nothing else writes before the response
// starts, and an empty send buffer takes 25 bytes at once). false: the client is gone, or
// the bytes went out in part, which would break the response that follows.
bool send_interim(int fd) {
    constexpr std::string_view probe = "HTTP/1.1 100 Continue\r\n\r\n";
    const ssize_t n = ::send(fd, probe.data(), probe.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    return static_cast<std::size_t>(n) == probe.size();
}

}  // namespace

awaitable<void> watch_hangup(asio::ip::tcp::socket& socket, beast::flat_buffer& pending, std::shared_ptr<HangupWatch> w) {
    using tcp = asio::ip::tcp;
    auto hangup = [&] {
        if (!w->done && w->on_hangup) w->on_hangup();
    };
    const int fd = socket.native_handle();
    while (!w->half_closed) {
        boost::system::error_code ec;
        co_await socket.async_wait(tcp::socket::wait_read, asio::redirect_error(use_awaitable, ec));
        if (w->done || ec == asio::error::operation_aborted) co_return;
        if (ec) {
            hangup();
            co_return;
        }
        if (pending.size() >= (64u << 10)) co_return;
        auto room = pending.prepare(4096);
        const ssize_t n = ::recv(fd, room.data(), room.size(), MSG_DONTWAIT);
        if (n > 0) {
            pending.commit(static_cast<std::size_t>(n));
        } else if (n == 0) {
            w->half_closed = true;
            if (w->on_half_close) w->on_half_close();
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            hangup();  // a reset or another read error
            co_return;
        }
    }
    // Half-closed: nothing more can be read. Probe, and look for the reset, every kProbeEvery.
    while (!w->done) {
        if (socket_failed(fd) || (!w->response_started && w->interim_ok && !send_interim(fd))) {
            hangup();
            co_return;
        }
        boost::system::error_code ec;
        w->tick.expires_after(kProbeEvery);
        co_await w->tick.async_wait(asio::redirect_error(use_awaitable, ec));
    }
}

}  // namespace inkling::gateway
