// Server::route — the guards every request passes, in order (one Host header and an allowed
// one, the per-address cap, a cross-site Origin, CORS preflight), then its row of the handler
// table (routes.cpp): the key if the path needs one, its methods, its handler. An ApiError
// thrown before anything was written becomes the route's error response, shaped by its
// dialect. Below it, the guards' pieces: the Host, the API key, the Origin, the client's
// address (its X-Forwarded-For behind a trusted proxy).
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "gateway/api/api_error.h"
#include "gateway/http/connection.h"
#include "gateway/http/routes.h"
#include "gateway/http/server.h"
#include "protocol/fields.h"

namespace inkling::gateway {

using Request = http::request<http::string_body>;

awaitable<bool> Server::route(Connection& c, Request& req) {
    // This request's share of its client's count, given back however it ends.
    struct Client {
        Server& s;
        std::string address;
        bool counted = false;
        ~Client() {
            if (counted) s.uncount(address);
        }
    } client{*this, {}};
    std::string target(req.target());
    std::string path = target.substr(0, target.find('?'));
    const auto method = req.method();
    const Route* route = find_route(path);
    std::optional<ApiError> failure;
    try {
        if (req.count(http::field::host) > 1 || (req.version() >= 11 && req[http::field::host].empty())) {
            req.keep_alive(false);
            co_await refuse_early(c, req, path, bad_request("exactly one Host header is required"));
            co_return false;
        }
        if (!host_allowed(req)) {
            co_await refuse_early(c, req, path, forbidden("Host header not allowed"));
            co_return false;
        }
        // The per-address cap: connections of a direct client, requests in flight of one
        // behind a trusted proxy. /health and /metrics are exempt (a proxy's health check
        // must not get a 429 because its users hold streams).
        client.address = client_address(c, req);
        if (c.via_proxy) {
            ++per_ip_[client.address];
            client.counted = true;
        }
        if (path != "/health" && !path.starts_with("/health/") && path != "/metrics") {
            auto it = per_ip_.find(client.address);
            if (it != per_ip_.end() && it->second > o_.max_connections_per_ip) {
                req.keep_alive(false);
                co_await refuse_early(c, req, path,
                                      rate_limited("too many connections from " + client.address + " (" +
                                                       std::to_string(o_.max_connections_per_ip) + " at most); retry",
                                                   "too_many_connections"));
                co_return false;
            }
        }
        // Cross-site requests: a page on another origin can POST a "simple" request
        // (text/plain, no preflight) and the browser sends it with its Origin. Every
        // method that acts is refused unless that origin is allowed; clients that are not
        // browsers send no Origin, and any Content-Type is read as JSON.
        if (method != http::verb::get && method != http::verb::head && method != http::verb::options &&
            !origin_permitted(req))
            throw forbidden("the Origin '" + protocol::printable(std::string(req[http::field::origin]), 200) +
                                "' may not call this gateway (allow it with --cors-origin)",
                            "origin_not_allowed");
        static const Route kNone{"", false, false, Route::kAny, "", nullptr};
        Call call{c, req, path, route ? *route : kNone};
        if (method == http::verb::options) co_return co_await on_preflight(call);
        if (!route) {
            if (method == http::verb::get) {
                const bool served = co_await on_web_asset(call);
                if (served) co_return true;
            }
            const bool api = path.starts_with("/v1/") || path == "/metrics";
            if (!api) throw not_found("no route for " + std::string(req.method_string()) + " " + path);
            if (!authorized(req)) throw invalid_api_key();
            throw not_found("no route for " + path);
        }
        if (route->needs_key && !authorized(req)) throw invalid_api_key();
        if (!route->allows(method)) throw method_not_allowed(route->method_hint);
        // Shutting down: a connection opened before the signal may not start new work (it
        // would stretch the drain); 503 and the connection closes.
        if (!accepting_ && route->dialect)
            throw unavailable("the gateway is shutting down; retry elsewhere or later", "draining", 1);
        co_return co_await (this->*route->handler)(call);
    } catch (const ApiError& e) {
        failure = e;  // (a coroutine cannot co_await inside a handler)
    } catch (const std::exception& e) {
        // A bug or an engine's odd telemetry, not the caller's fault: logged, a 500.
        std::fprintf(stderr, "[gateway] internal error on %s %s: %s\n", std::string(req.method_string()).c_str(),
                     path.c_str(), e.what());
        failure = server_error(std::string("internal error: ") + e.what());
    }
    // A stream already committed (SSE) cannot take an error body: end the connection.
    if (c.close_after) co_return false;
    // Thrown before anything was written for this request: the route's dialect shapes it.
    const Dialect* dialect = dialect_of(path);
    const bool keep = failure->status < 500 && failure->status != 413;
    if (!keep) req.keep_alive(false);
    const nlohmann::json body = dialect ? dialect->error_body(*failure) : failure->body();
    co_await write_json(c, req, dialect ? status_of(*dialect, *failure) : failure->status, body,
                        dialect ? dialect->endpoint : "other", failure->retry_after);
    co_return keep;
}

// A guard's refusal, before the handler runs: shaped by the path's dialect like any error on
// it, but counted as "other" (the request never reached its endpoint).
awaitable<void> Server::refuse_early(Connection& c, Request& req, const std::string& path, const ApiError& error) {
    const Dialect* dialect = dialect_of(path);
    const nlohmann::json body = dialect ? dialect->error_body(error) : error.body();
    co_await write_json(c, req, dialect ? status_of(*dialect, error) : error.status, body, "other", error.retry_after);
}

std::string Server::canonical_address(const std::string& text) {
    boost::system::error_code ec;
    auto a = asio::ip::make_address(text, ec);
    if (ec) return {};
    if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).to_string();
    return a.to_string();
}

bool Server::trusted_proxy(const std::string& address) const {
    return std::find(trusted_proxies_.begin(), trusted_proxies_.end(), address) != trusted_proxies_.end();
}

std::string Server::client_address(const Connection& c, const Request& req) const {
    if (!c.via_proxy) return c.ip;
    // X-Forwarded-For from a trusted proxy: the rightmost address no trusted proxy wrote,
    // i.e. the one the outermost trusted proxy saw. Every header line counts, in order.
    std::vector<std::string> hops;
    for (auto it = req.find("X-Forwarded-For"); it != req.end() && beast::iequals(it->name_string(), "X-Forwarded-For");
         ++it) {
        std::string value(it->value());
        std::size_t start = 0;
        while (start <= value.size()) {
            std::size_t comma = value.find(',', start);
            if (comma == std::string::npos) comma = value.size();
            std::string hop = value.substr(start, comma - start);
            hop.erase(0, hop.find_first_not_of(" \t"));
            hop.erase(hop.find_last_not_of(" \t") + 1);
            hops.push_back(hop);
            start = comma + 1;
        }
    }
    for (auto h = hops.rbegin(); h != hops.rend(); ++h) {
        const std::string a = canonical_address(*h);
        if (a.empty()) break;  // malformed: the proxy's own address stands for the client
        if (!trusted_proxy(a)) return a;
    }
    return c.ip;
}

std::string Server::allowed_origin(const Request& req) const {
    const std::string origin(req[http::field::origin]);
    if (origin.empty()) return {};
    for (const auto& o : o_.cors_origins)
        if (o == "*" || o == origin) return origin;
    return {};
}

bool Server::origin_permitted(const Request& req) const {
    const std::string origin(req[http::field::origin]);
    if (req.count(http::field::origin) == 0) return true;  // not a browser, or same-origin GET
    if (req.count(http::field::origin) > 1) return false;
    if (!allowed_origin(req).empty()) return true;
    // Same origin (the web UI on a name given by --allowed-host, or behind a TLS proxy):
    // scheme://Host, the Host header already checked by host_allowed.
    const std::string host(req[http::field::host]);
    auto iequal = [](std::string_view a, std::string_view b) {
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
                   return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
               });
    };
    for (std::string_view scheme : {"http://", "https://"})
        if (!host.empty() && origin.size() == scheme.size() + host.size() &&
            iequal(std::string_view(origin).substr(0, scheme.size()), scheme) &&
            iequal(std::string_view(origin).substr(scheme.size()), host))
            return true;
    return false;
}

bool Server::authorized(const Request& req) const {
    if (o_.api_key.empty()) return true;
    std::string given;
    auto auth = req[http::field::authorization];
    if (auth.starts_with("Bearer ")) given = std::string(auth.substr(7));
    else if (auto k = req["x-api-key"]; !k.empty()) given = std::string(k);
    // Constant time in the key's length: every byte is compared whatever matched before.
    unsigned diff = given.size() != o_.api_key.size();
    for (std::size_t i = 0; i < o_.api_key.size(); ++i)
        diff |= static_cast<unsigned char>(o_.api_key[i]) ^ static_cast<unsigned char>(i < given.size() ? given[i] : 0);
    return diff == 0;
}

bool Server::host_allowed(const Request& req) const {
    std::string host(req[http::field::host]);
    if (host.empty()) return req.version() < 11;  // HTTP/1.1 requires Host (RFC 9112 §3.2)
    // Strip the port (and IPv6 brackets).
    if (host.front() == '[') host = host.substr(1, host.find(']') - 1);
    else if (auto colon = host.rfind(':'); colon != std::string::npos) host = host.substr(0, colon);
    // Host names are case-insensitive (RFC 9110 §4.2.3): LOCALHOST is localhost.
    auto lower = [](std::string t) {
        for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        return t;
    };
    host = lower(std::move(host));
    if (host == "localhost" || host == "127.0.0.1" || host == "::1" || host == lower(o_.host)) return true;
    for (const auto& h : o_.allowed_hosts)
        if (h == "*" || lower(h) == host) return true;
    return false;
}

}  // namespace inkling::gateway
