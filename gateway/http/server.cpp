#include "gateway/http/server.h"

#include "gateway/api/api_error.h"
#include "gateway/http/connection.h"

namespace inkling::gateway {

using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using Clock = std::chrono::steady_clock;

Server::Server(asio::io_context& io, ServerOptions options, Models& models, Metrics& metrics)
    : io_(io), o_(std::move(options)), models_(models), metrics_(metrics), acceptor_(io), workers_(2) {
    for (const auto& p : o_.trusted_proxies) {
        const std::string a = canonical_address(p);
        if (a.empty()) throw std::runtime_error("--trusted-proxy " + p + " is not an IP address");
        trusted_proxies_.push_back(a);
    }
}

Server::~Server() { workers_.join(); }

void Server::listen() {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(o_.host, ec);
    if (ec) throw std::runtime_error("--host " + o_.host + " is not an IP address");
    tcp::endpoint ep(address, o_.port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep, ec);
    if (ec) throw std::runtime_error("cannot listen on " + o_.host + ":" + std::to_string(o_.port) + ": " + ec.message());
    acceptor_.listen();
    asio::co_spawn(io_, accept_loop(), asio::detached);
}

void Server::stop_accepting() {
    accepting_ = false;
    boost::system::error_code ec;
    acceptor_.close(ec);
}

awaitable<void> Server::accept_loop() {
    while (accepting_) {
        boost::system::error_code ec;
        tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
        if (ec) {
            if (!accepting_) co_return;
            continue;
        }
        std::string ip = canonical_address(socket.remote_endpoint(ec).address().to_string());
        // Over the total cap a connection gets a 429 and is closed at once, never queued.
        // The per-address cap is applied per request (route): /health and /metrics pass it.
        if (connections_ >= o_.max_connections) {
            metrics_.request("other", 429);
            asio::co_spawn(io_, refuse(std::move(socket)), asio::detached);
            continue;
        }
        auto c = std::make_shared<Connection>(std::move(socket));
        c->ip = ip;
        c->via_proxy = trusted_proxy(ip);
        ++connections_;
        if (!c->via_proxy) ++per_ip_[ip];  // a proxy's connections are its users', counted per request
        asio::co_spawn(io_, serve(c), asio::detached);
    }
}

awaitable<void> Server::refuse(tcp::socket socket) {
    const std::string body =
        rate_limited("too many connections; retry", "too_many_connections").body().dump();
    const std::string response = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                                 "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    boost::system::error_code ec;
    asio::steady_timer deadline(io_);
    deadline.expires_after(std::chrono::seconds(2));
    deadline.async_wait([&socket](auto e) {
        if (!e) socket.close();
    });
    co_await asio::async_write(socket, asio::buffer(response), asio::redirect_error(use_awaitable, ec));
    deadline.cancel();
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
}

awaitable<void> Server::serve(std::shared_ptr<Connection> c) {
    // The caps' counts are given back however this coroutine ends (an exception included:
    // eight leaked counts refused the address for good).
    struct Counted {
        Server& s;
        const Connection& c;
        ~Counted() {
            --s.connections_;
            if (!c.via_proxy) s.uncount(c.ip);
        }
    } counted{*this, *c};
    beast::flat_buffer& buffer = c->buffer;
    while (true) {
        http::request_parser<http::string_body> parser;
        parser.header_limit(16 * 1024);
        parser.body_limit(o_.max_body);
        // One deadline for the whole request (headers and body): slow clients are cut off.
        c->stream.expires_after(o_.read_deadline);
        boost::system::error_code ec;
        co_await http::async_read(c->stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
        if (ec) {
            if (ec == http::error::body_limit) {
                Response res{http::status::payload_too_large, 11};
                res.set(http::field::content_type, "application/json");
                const ApiError too_large =
                    payload_too_large("the request body exceeds " + std::to_string(o_.max_body) + " bytes");
                // The headers are in: the path's dialect shapes the error, as any on its route.
                const std::string target(parser.get().target());
                const Dialect* dialect = dialect_of(target.substr(0, target.find('?')));
                res.body() = (dialect ? dialect->error_body(too_large) : too_large.body()).dump();
                res.keep_alive(false);
                res.prepare_payload();
                metrics_.request("other", 413);
                co_await write(*c, res);
            } else if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
                       ec != http::error::end_of_stream && ec != http::error::partial_message) {
                Response res{http::status::bad_request, 11};
                res.set(http::field::content_type, "application/json");
                res.body() = bad_request("malformed HTTP request: " + ec.message()).body().dump();
                res.keep_alive(false);
                res.prepare_payload();
                metrics_.request("other", 400);
                co_await write(*c, res);
            }
            break;
        }
        c->stream.expires_never();
        Request req = parser.release();
        bool keep = co_await route(*c, req);
        if (!keep || !req.keep_alive() || c->disconnected || c->close_after) break;
    }
    boost::system::error_code ec;
    c->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    c->stream.close();
}

awaitable<void> Server::write(Connection& c, Response& res) {
    boost::system::error_code ec;
    c.stream.expires_after(std::chrono::seconds(30));
    co_await http::async_write(c.stream, res, asio::redirect_error(use_awaitable, ec));
    c.stream.expires_never();
    if (ec) c.disconnected = true;
}

void Server::uncount(const std::string& address) {
    auto it = per_ip_.find(address);
    if (it != per_ip_.end() && --it->second <= 0) per_ip_.erase(it);
}

std::string Server::cors_header_block(const Request& req) const {
    const std::string origin = allowed_origin(req);
    if (origin.empty()) return {};
    return "Access-Control-Allow-Origin: " + origin +
           "\r\nVary: Origin\r\nAccess-Control-Expose-Headers: x-request-id, request-id, Retry-After\r\n";
}

void Server::cors(const Request& req, Response& res) const {
    const std::string origin = allowed_origin(req);
    if (origin.empty()) return;
    res.set(http::field::access_control_allow_origin, origin);
    res.set(http::field::vary, "Origin");
    res.set(http::field::access_control_expose_headers, "x-request-id, request-id, Retry-After");
}

awaitable<void> Server::write_json(Connection& c, const Request& req, int status, const nlohmann::json& body,
                                   const char* endpoint, int retry_after, const std::string& conversation) {
    Response res{static_cast<http::status>(status), req.version()};
    res.set(http::field::content_type, "application/json");
    const std::string request_id = "req_" + std::to_string(++request_counter_);
    res.set("x-request-id", request_id);
    res.set("request-id", request_id);  // the name the Anthropic SDK reads
    if (retry_after > 0) res.set(http::field::retry_after, std::to_string(retry_after));
    if (!conversation.empty()) res.set("x-conversation-key", conversation);
    if (status == 529) res.reason("Overloaded");  // Anthropic's; not an IANA status Beast can name
    cors(req, res);
    res.keep_alive(req.keep_alive());
    res.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    res.prepare_payload();
    // HEAD: the headers GET would send (Content-Length included), no body (RFC 9110 §9.3.2).
    if (req.method() == http::verb::head) res.body().clear();
    metrics_.request(endpoint, status);
    co_await write(c, res);
}

}  // namespace inkling::gateway
