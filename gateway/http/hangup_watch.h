// Watches a client connection while its request runs, for the client's end: a reset or a
// read error is a hang-up (the request is CANCELled); a half-close (FIN, as `nc -N` or an
// HTTP/1.0-style client sends after its request) is not — the answer still goes out in full.
//
// TCP cannot tell a half-close from a full close by reading: only a write tells, because a
// closed socket answers it with a reset. So every kProbeEvery while a half-closed client
// waits, something harmless is written: before the response has started (queued, waiting for
// ACCEPT, a non-streaming generation) the watch itself writes an interim `HTTP/1.1 100
// Continue` (HTTP/1.1 clients must skip 1xx responses; an HTTP/1.0 client gets none, so its
// full close is noticed only when the answer is written); once a stream has started, its
// writer sends an SSE comment (Server::generate). The reset that follows is the hang-up.
//
// Bytes that arrive meanwhile (a pipelined request, a stray CRLF) go into the connection's
// buffer for the next request and the watch goes on; a client pipelining more than 64 KiB is
// no longer read (nor watched).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "gateway/asio.h"

namespace inkling::gateway {

inline constexpr std::chrono::seconds kProbeEvery{2};

struct HangupWatch {
    explicit HangupWatch(asio::any_io_executor ex) : tick(std::move(ex)) {}
    std::function<void()> on_hangup;      // called at most once, never after `done`
    std::function<void()> on_half_close;  // the client sent FIN (called at most once, never after `done`)
    bool interim_ok = false;              // the request is HTTP/1.1: 1xx responses may be sent
    bool response_started = false;        // set before the response's first byte: the watch writes nothing more
    bool half_closed = false;             // the client sent FIN
    bool done = false;                    // the request ended: set, then stop() (before the socket goes)
    asio::steady_timer tick;              // the probes' clock

    void stop() {
        done = true;
        tick.cancel();
    }
};

awaitable<void> watch_hangup(asio::ip::tcp::socket& socket, beast::flat_buffer& pending, std::shared_ptr<HangupWatch> watch);

}  // namespace inkling::gateway
