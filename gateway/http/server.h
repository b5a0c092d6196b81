// The HTTP side of the gateway: an Asio/Beast listener, one coroutine per connection
// (server.cpp), the guards every request passes (guards.cpp), the handler table and its
// handlers (routes.cpp; health and metrics in health.cpp), and the generation of one answer
// (gateway/generation/generation.cpp) through a dialect's Formatter (gateway/api/dialect.h).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gateway/api/dialect.h"
#include "gateway/engines/affinity_map.h"
#include "gateway/engines/models.h"
#include "gateway/generation/generation_request.h"
#include "gateway/metrics.h"

namespace inkling::gateway {

struct ServerOptions {
    std::string host = "127.0.0.1";
    unsigned short port = 8000;
    std::string api_key;                     // empty: no auth
    std::vector<std::string> allowed_hosts;  // Host header guard ("*" disables it)
    std::vector<std::string> cors_origins;   // exact origins ("*" allows all)
    std::size_t max_body = 32u << 20;        // bytes (audio comes base64 inside JSON)
    std::chrono::seconds read_deadline{30};
    std::chrono::seconds write_deadline{30};  // a streamed write that makes no progress this long: the client is gone
    int max_connections = 64, max_connections_per_ip = 8;
    std::vector<std::string> trusted_proxies;  // peers whose X-Forwarded-For names the client
    std::chrono::seconds queue_timeout{300};
    std::chrono::seconds engine_wait{120};   // how long a request waits for a (re)starting or loading engine
    std::chrono::seconds accept_deadline{30};  // SUBMIT → ACCEPT, at most
    std::chrono::seconds frame_deadline{300};  // after ACCEPT, between one frame of a request and the next
    int retries = 3;                         // resubmissions after the engine died before ACCEPT
    std::size_t affinity_entries = 4096;     // conversations whose slot is remembered (LRU)
    GatewayLimits limits;
};

class Server {
public:
    Server(asio::io_context& io, ServerOptions options, Models& models, Metrics& metrics);
    ~Server();
    // Binds (throws std::runtime_error naming the address when it cannot) and serves.
    void listen();
    void stop_accepting();
    int active_requests() const { return active_requests_; }

private:
    struct Connection;
    struct Call;   // one request being handled (routes.h)
    struct Route;  // one entry of the handler table (routes.h)
    using Request = http::request<http::string_body>;
    awaitable<void> accept_loop();
    awaitable<void> serve(std::shared_ptr<Connection> c);
    awaitable<void> refuse(asio::ip::tcp::socket socket);  // 429 for a connection over the caps
    // The guards every request passes (Host, caps, Origin, auth), then its handler; an
    // ApiError thrown before anything was written becomes the route's error response.
    // Returns whether the connection may serve another request.
    awaitable<bool> route(Connection& c, Request& req);
    static const Route* find_route(const std::string& path);
    // The dialect that shapes errors on `path`: its route's, the Messages API's under
    // /v1/messages/, else nullptr (OpenAI's shape).
    static const Dialect* dialect_of(const std::string& path);
    awaitable<void> refuse_early(Connection& c, Request& req, const std::string& path, const ApiError& error);
    awaitable<bool> on_preflight(Call& call);
    awaitable<bool> on_health(Call& call);
    awaitable<bool> on_model_health(Call& call);  // /health/{model}
    awaitable<bool> on_web_asset(Call& call);
    awaitable<bool> on_metrics(Call& call);
    awaitable<bool> on_stats(Call& call);
    awaitable<bool> on_models(Call& call);
    awaitable<bool> on_model(Call& call);
    awaitable<bool> on_generation(Call& call);  // the route's dialect: parse, then generate()
    // One answer from admission to the last byte (gateway/generation/generation.cpp), in
    // named steps over one Generation, the request's state.
    struct Generation;
    awaitable<void> generate(Connection& c, const Request& req, const Dialect& dialect, GenerationRequest g);
    awaitable<void> write(Connection& c, http::response<http::string_body>& res);
    // `conversation`: an x-conversation-key header (a generation's answer).
    awaitable<void> write_json(Connection& c, const http::request<http::string_body>& req, int status,
                               const nlohmann::json& body, const char* endpoint, int retry_after = 0,
                               const std::string& conversation = {});
    void cors(const http::request<http::string_body>& req, http::response<http::string_body>& res) const;
    std::string cors_header_block(const http::request<http::string_body>& req) const;
    std::string allowed_origin(const http::request<http::string_body>& req) const;  // "" if none
    // No Origin, an allowed one (--cors-origin), or the gateway's own (scheme://Host).
    bool origin_permitted(const http::request<http::string_body>& req) const;
    bool authorized(const http::request<http::string_body>& req) const;
    // The address the per-address cap counts: the peer, or for a trusted proxy the client
    // its X-Forwarded-For names.
    std::string client_address(const Connection& c, const http::request<http::string_body>& req) const;
    bool trusted_proxy(const std::string& address) const;
    static std::string canonical_address(const std::string& text);  // "" if not an IP
    void uncount(const std::string& address);
    bool host_allowed(const http::request<http::string_body>& req) const;
    nlohmann::json stats_json() const;
    // /health's answer: every model's (status 200 when each is healthy), or `only` one's.
    void health_state(int& status, int& retry_after, nlohmann::json& body, const Model* only = nullptr) const;
    // The conversation key of a request (x-session-id, else its affinity hash) into `g`.
    static void conversation_key(const http::request<http::string_body>& req, GenerationRequest& g);

    asio::io_context& io_;
    ServerOptions o_;
    Models& models_;
    Metrics& metrics_;
    asio::ip::tcp::acceptor acceptor_;
    std::map<std::string, int> per_ip_;  // connections (direct) and requests (via a proxy) per client
    std::vector<std::string> trusted_proxies_;
    int connections_ = 0, active_requests_ = 0;
    std::uint64_t request_counter_ = 0;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    bool accepting_ = true;
    // Request parsing, audio and prompt rendering: off the io thread (see docs/gateway.md).
    asio::thread_pool workers_;
};

}  // namespace inkling::gateway
