// One client connection, shared by the HTTP plumbing (server.cpp) and the generation
// handler (gateway/generation/generation.cpp). Internal to the gateway.
#pragma once

#include <memory>
#include <string>

#include "gateway/asio.h"
#include "gateway/http/server.h"

namespace inkling::gateway {

struct Server::Connection {
    explicit Connection(asio::ip::tcp::socket s)
        : stream(std::move(s)), wake(std::make_shared<Signal>(stream.get_executor())) {}
    beast::tcp_stream stream;
    std::string ip;                // the peer's address, canonical
    bool via_proxy = false;        // the peer is a --trusted-proxy
    bool disconnected = false;     // the client hung up
    bool close_after = false;      // the response is framed by closing the connection (SSE)
    std::shared_ptr<Signal> wake;  // wakes a request waiting in the queue
    // Bytes read but not yet parsed: the HTTP reader's, and those the hang-up watcher reads
    // while a request runs (a pipelined request, a stray CRLF), kept for the next request.
    beast::flat_buffer buffer;
};

}  // namespace inkling::gateway
