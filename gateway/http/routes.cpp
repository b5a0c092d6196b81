// Server::route — the guards every request passes, in order (one Host header and an allowed
// one, the per-address cap, a cross-site Origin, CORS preflight), then the handler table:
// each path's access (public or API key), methods and handler. The generation routes name
// their dialect (dialect.h): it parses the body, shapes the answer and every error on that
// route, so a new API plugs in as one table row and one dialect.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <sstream>

#include "gateway/api/anthropic/dialect_messages.h"
#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"
#include "gateway/api/openai/openai_request.h"
#include "gateway/api/openai/dialect_chat.h"
#include "gateway/api/openai/dialect_completions.h"
#include "gateway/http/connection.h"
#include "gateway/http/cors_headers.h"
#include "gateway/http/server.h"
#include "gateway/http/web_assets.h"
#include "protocol/fields.h"
#include "protocol/limits.h"

namespace inkling::gateway {

using Response = http::response<http::string_body>;
using Clock = std::chrono::steady_clock;

struct Server::Call {
    Connection& c;
    Request& req;
    const std::string& path;
    const Route& route;
};

struct Server::Route {
    enum Methods : unsigned { kGet = 1, kHead = 2, kPost = 4, kAny = 0 /* the handler decides */ };
    std::string_view path;
    bool prefix;     // every path under `path` (which ends in '/')
    bool needs_key;  // --api-key applies
    unsigned methods;
    const char* method_hint;  // the 405's message
    awaitable<bool> (Server::*handler)(Call&);
    const Dialect* dialect = nullptr;  // generation routes

    bool allows(http::verb v) const {
        return methods == kAny || ((methods & kGet) && v == http::verb::get) || ((methods & kHead) && v == http::verb::head) ||
               ((methods & kPost) && v == http::verb::post);
    }
};

const Server::Route* Server::find_route(const std::string& path) {
    static const Route table[] = {
        {"/health", false, false, Route::kGet | Route::kHead, "use GET", &Server::on_health},
        {"/health/", true, false, Route::kGet | Route::kHead, "use GET", &Server::on_model_health},
        {"/metrics", false, true, Route::kGet, "use GET", &Server::on_metrics},
        {"/v1/stats", false, true, Route::kGet, "use GET", &Server::on_stats},
        {"/v1/models", false, true, Route::kGet, "use GET", &Server::on_models},
        {"/v1/models/", true, true, Route::kAny, "use GET", &Server::on_model},
        {"/v1/chat/completions", false, true, Route::kPost, "use POST", &Server::on_generation, &chat_dialect()},
        {"/v1/completions", false, true, Route::kPost, "use POST", &Server::on_generation, &completions_dialect()},
        // The Anthropic Messages API (x-api-key or Bearer; anthropic-version and anthropic-beta
        // are accepted whatever they say). The SDK's beta client appends ?beta=true: routed
        // on the path alone.
        {"/v1/messages", false, true, Route::kPost, "use POST", &Server::on_generation, &messages_dialect()},
        {"/v1/messages/count_tokens", false, true, Route::kPost, "use POST", &Server::on_generation, &count_tokens_dialect()},
    };
    for (const Route& r : table)
        if (r.prefix ? path.starts_with(r.path) : path == r.path) return &r;
    return nullptr;
}

const Dialect* Server::dialect_of(const std::string& path) {
    if (const Route* route = find_route(path)) return route->dialect;
    // Paths of the Messages API this server does not serve (batches, …): a 404 the SDK reads.
    return path.starts_with("/v1/messages/") ? &messages_dialect() : nullptr;
}

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
            co_await refuse_early(c, req, path, ApiError(400, "invalid_request_error", "exactly one Host header is required"));
            co_return false;
        }
        if (!host_allowed(req)) {
            co_await refuse_early(c, req, path, ApiError(403, "forbidden", "Host header not allowed"));
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
                                      ApiError(429, "rate_limit_error",
                                               "too many connections from " + client.address + " (" +
                                                   std::to_string(o_.max_connections_per_ip) + " at most); retry",
                                               "", "too_many_connections", 1));
                co_return false;
            }
        }
        // Cross-site requests: a page on another origin can POST a "simple" request
        // (text/plain, no preflight) and the browser sends it with its Origin. Every
        // method that acts is refused unless that origin is allowed; clients that are not
        // browsers send no Origin, and any Content-Type is read as JSON.
        if (method != http::verb::get && method != http::verb::head && method != http::verb::options &&
            !origin_permitted(req))
            throw ApiError(403, "forbidden",
                           "the Origin '" + protocol::printable(std::string(req[http::field::origin]), 200) +
                               "' may not call this gateway (allow it with --cors-origin)",
                           "", "origin_not_allowed");
        static const Route kNone{"", false, false, Route::kAny, "", nullptr};
        Call call{c, req, path, route ? *route : kNone};
        if (method == http::verb::options) co_return co_await on_preflight(call);
        if (!route) {
            if (method == http::verb::get) {
                const bool served = co_await on_web_asset(call);
                if (served) co_return true;
            }
            const bool api = path.starts_with("/v1/") || path == "/metrics";
            if (!api) throw ApiError(404, "invalid_request_error", "no route for " + std::string(req.method_string()) + " " + path);
            if (!authorized(req)) throw ApiError(401, "authentication_error", "Incorrect API key provided", "", "invalid_api_key");
            throw ApiError(404, "invalid_request_error", "no route for " + path);
        }
        if (route->needs_key && !authorized(req))
            throw ApiError(401, "authentication_error", "Incorrect API key provided", "", "invalid_api_key");
        if (!route->allows(method)) throw ApiError(405, "invalid_request_error", route->method_hint);
        // Shutting down: a connection opened before the signal may not start new work (it
        // would stretch the drain); 503 and the connection closes.
        if (!accepting_ && route->dialect)
            throw ApiError(503, "server_error", "the gateway is shutting down; retry elsewhere or later", "",
                           "draining", 1);
        co_return co_await (this->*route->handler)(call);
    } catch (const ApiError& e) {
        failure = e;  // (a coroutine cannot co_await inside a handler)
    } catch (const std::exception& e) {
        // A bug or an engine's odd telemetry, not the caller's fault: logged, a 500.
        std::fprintf(stderr, "[gateway] internal error on %s %s: %s\n", std::string(req.method_string()).c_str(),
                     path.c_str(), e.what());
        failure = ApiError(500, "server_error", std::string("internal error: ") + e.what());
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

awaitable<bool> Server::on_preflight(Call& call) {
    Response res{http::status::no_content, call.req.version()};
    cors(call.req, res);
    res.set(http::field::access_control_allow_methods, "GET, POST, OPTIONS");
    res.set(http::field::access_control_allow_headers,
            preflight_allow_headers(std::string(call.req[http::field::access_control_request_headers])));
    res.set(http::field::access_control_max_age, "600");
    res.keep_alive(call.req.keep_alive());
    res.prepare_payload();
    metrics_.request("options", 204);
    co_await write(call.c, res);
    co_return true;
}

void Server::health_state(int& status, int& retry_after, nlohmann::json& body, const Model* only) const {
    // 200 while every model (or `only`) is healthy: ready, unloaded (its first request loads
    // it) or loading on demand; 503 while one is starting, restarting, failed or draining.
    const Model* bad = nullptr;
    double next = 0;
    nlohmann::json models = nlohmann::json::object();
    for (const auto& m : models_.all()) {
        if (only && m.get() != only) continue;
        models[m->id] = {{"status", m->status()}};
        if (!m->healthy()) {
            if (!bad) bad = m.get();
            next = std::max(next, m->engine.seconds_to_next_attempt());
        }
    }
    status = !bad && accepting_ ? 200 : 503;
    retry_after = status == 200 ? 0 : std::max(1, static_cast<int>(std::ceil(next)));
    body = {{"status", status == 200 ? "ok" : !accepting_ ? "draining" : bad->status()}};
    if (status != 200) {
        const std::string why = bad ? bad->engine.reason() : "";
        body["reason"] = bad && models_.all().size() > 1 ? "model " + bad->id + (why.empty() ? "" : ": " + why) : why;
        if (next > 0) body["retry_in_s"] = std::round(next * 10) / 10;
    }
    body["models"] = std::move(models);
}

awaitable<bool> Server::on_health(Call& call) {
    int status = 0, retry = 0;
    nlohmann::json body;
    health_state(status, retry, body);
    if (authorized(call.req)) {
        for (const auto& m : models_.all())
            body["models"][m->id].update({{"pid", m->engine.pid()}, {"restarts", m->engine.restarts()}});
        const Model& first = *models_.all().front();
        if (status == 200) body["engine"] = {{"pid", first.engine.pid()}, {"restarts", first.engine.restarts()}};
    }
    co_await write_json(call.c, call.req, status, body, "health", retry);
    co_return true;
}

// /health/{model}: that model's health alone (a balancer that routes by model checks it).
awaitable<bool> Server::on_model_health(Call& call) {
    const std::string id = call.path.substr(std::string_view("/health/").size());
    const Model* m = models_.find(id);
    if (!m) throw ApiError(404, "invalid_request_error", "The model '" + id + "' does not exist", "model", "model_not_found");
    int status = 0, retry = 0;
    nlohmann::json body;
    health_state(status, retry, body, m);
    if (authorized(call.req)) body["models"][id].update({{"pid", m->engine.pid()}, {"restarts", m->engine.restarts()}});
    co_await write_json(call.c, call.req, status, body, "health", retry);
    co_return true;
}

// false: no asset at this path (the caller answers 404).
awaitable<bool> Server::on_web_asset(Call& call) {
    for (const auto& asset : web_assets())
        if (call.path == asset.path || (call.path == "/" && std::string_view(asset.path) == "/index.html")) {
            Response res{http::status::ok, call.req.version()};
            res.set(http::field::content_type, asset.content_type);
            res.set(http::field::cache_control, "no-cache");
            res.keep_alive(call.req.keep_alive());
            res.body() = std::string(asset.data);
            res.prepare_payload();
            metrics_.request("web", 200);
            co_await write(call.c, res);
            co_return true;
        }
    co_return false;
}

awaitable<bool> Server::on_metrics(Call& call) {
    double queued = 0, active = 0;
    for (const auto& m : models_.all()) {
        queued += m->slots.queued();
        active += m->slots.active();
    }
    metrics_.queue_depth = queued;
    metrics_.active = active;
    std::string extra;
    auto family = [&](const std::string& name, const char* type, const std::string& help) {
        extra += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    auto sample = [&](const std::string& name, const std::string& model, double v) {
        std::ostringstream o;
        o.precision(10);
        o << v;
        extra += name + "{model=\"" + model + "\"} " + o.str() + "\n";
    };
    // Per model, with a model label. A family is written only with a sample: Prometheus
    // rejects a HELP line with nothing under it in some versions.
    auto per_model = [&](const std::string& name, const char* type, const std::string& help, auto value) {
        std::vector<std::pair<std::string, double>> samples;
        for (const auto& m : models_.all())
            if (auto v = value(*m)) samples.emplace_back(m->id, *v);
        if (samples.empty()) return;
        family(name, type, help);
        for (const auto& [id, v] : samples) sample(name, id, v);
    };
    // The engine's STATS as it sent them: a field of another type is left out.
    auto number = [](const nlohmann::json& j, const char* outer, const char* inner) -> std::optional<double> {
        if (!j.is_object() || !j.contains(outer)) return std::nullopt;
        const nlohmann::json* v = &j[outer];
        if (inner) {
            if (!v->is_object() || !v->contains(inner)) return std::nullopt;
            v = &(*v)[inner];
        }
        return v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
    };
    using Opt = std::optional<double>;
    int status = 0, retry = 0;
    nlohmann::json health;
    health_state(status, retry, health);
    family("inkling_engine_up", "gauge", "1 while /health answers 200 (every model ready, unloaded or loading on demand).");
    extra += "inkling_engine_up " + std::to_string(status == 200 ? 1 : 0) + "\n";
    per_model("inkling_model_up", "gauge", "1 while the model's engine is ready.",
              [](const Model& m) { return Opt(m.engine.state() == EngineSupervisor::State::Ready); });
    per_model("inkling_model_loaded", "gauge", "1 while an engine runs for the model (loading, ready or restarting).",
              [](const Model& m) { return Opt(m.engine.state() != EngineSupervisor::State::Stopped); });
    per_model("inkling_model_requests_total", "counter", "Generation requests for the model.",
              [](const Model& m) { return Opt(m.requests.value); });
    per_model("inkling_model_prompt_tokens_total", "counter", "Prompt tokens of the model's requests.",
              [](const Model& m) { return Opt(m.prompt_tokens.value); });
    per_model("inkling_model_cached_tokens_total", "counter", "Of those, reused from a slot's prefix (not prefilled).",
              [](const Model& m) { return Opt(m.cached_tokens.value); });
    per_model("inkling_model_completion_tokens_total", "counter", "Tokens the model generated.",
              [](const Model& m) { return Opt(m.completion_tokens.value); });
    per_model("inkling_model_loads_total", "counter", "Times the model's engine was started (at start-up or on demand).",
              [](const Model& m) { return Opt(m.loads.value); });
    per_model("inkling_model_unloads_total", "counter", "Times it was stopped (idle, or to make room under the budget).",
              [](const Model& m) { return Opt(m.unloads.value); });
    per_model("inkling_model_queue_depth", "gauge", "The model's requests waiting for a slot.",
              [](const Model& m) { return Opt(m.slots.queued()); });
    per_model("inkling_model_requests_active", "gauge", "The model's requests being served.",
              [](const Model& m) { return Opt(m.slots.active()); });
    per_model("inkling_expert_cache_hit_ratio", "gauge", "Expert cache hit rate (0-1).", [&](const Model& m) {
        auto v = number(m.engine.stats(), "expert_cache", "hit_pct");
        return v ? Opt(*v / 100.0) : Opt();
    });
    per_model("inkling_engine_resident_bytes", "gauge", "Engine resident set size.", [&](const Model& m) {
        auto v = number(m.engine.stats(), "rss_gb", nullptr);
        return v ? Opt(*v * 1e9) : Opt();
    });
    per_model("inkling_device_memory_used_bytes", "gauge", "Device memory in use.",
              [&](const Model& m) { return number(m.engine.stats(), "device", "memory_used"); });
    per_model("inkling_device_memory_budget_bytes", "gauge", "Device memory budget.",
              [&](const Model& m) { return number(m.engine.stats(), "device", "memory_budget"); });
    // The Vulkan chain's figures (docs/vulkan.md, STATS), as the engine's last STATS has them.
    struct DeviceFigure {
        const char *name, *type, *help, *field;
    };
    static constexpr DeviceFigure kDevice[] = {
        {"inkling_device_expert_bytes", "gauge", "Device memory the routed experts' slots hold (the tier's share).",
         "expert_bytes"},
        {"inkling_device_expert_layers", "gauge", "MoE layers with every routed expert on the device (resident).",
         "expert_layers"},
        {"inkling_device_tier_layers", "gauge", "MoE layers with device slots for routed experts (resident or a tier).",
         "tier_layers"},
        {"inkling_device_tier_slots", "gauge", "Device slots for routed experts, over every MoE layer.", "tier_slots"},
        {"inkling_device_tier_uploads_total", "counter", "Experts uploaded into the tier's slots (the first fill not counted).",
         "tier_uploads"},
        {"inkling_device_tier_evictions_total", "counter", "Experts the tier evicted from their slots.", "tier_evictions"},
        {"inkling_device_expert_pairs_total", "counter", "Routed (row, expert) pairs computed on the device.",
         "device_pairs"},
        {"inkling_host_expert_pairs_total", "counter", "Routed (row, expert) pairs the host computed beside the device.",
         "host_pairs"},
        {"inkling_device_streamed_experts_total", "counter",
         "Experts the tier lacked that were streamed to the device for one step (a prompt chunk's cold experts).",
         "tier_streamed"},
        {"inkling_device_streamed_pairs_total", "counter", "Routed pairs of streamed experts (of the device's pairs).",
         "stream_pairs"},
        {"inkling_device_steps_total", "counter", "Steps the device ran to their end.", "steps"},
        {"inkling_device_frames_per_step", "gauge", "Device submits a step (a decode step: one token a session).",
         "frames_per_step"},
        {"inkling_device_waits_per_step", "gauge", "Host waits for the device a step.", "waits_per_step"},
    };
    for (const DeviceFigure& d : kDevice)
        per_model(d.name, d.type, d.help, [&](const Model& m) { return number(m.engine.stats(), "device", d.field); });
    Response res{http::status::ok, call.req.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.keep_alive(call.req.keep_alive());
    res.body() = metrics_.render(extra);
    res.prepare_payload();
    metrics_.request("metrics", 200);
    co_await write(call.c, res);
    co_return true;
}

namespace {

nlohmann::json engine_json(const EngineSupervisor& e) {
    return {{"state", EngineSupervisor::state_name(e.state())},
            {"pid", e.pid()},
            {"restarts", e.restarts()},
            {"reason", e.reason()},
            {"retry_in_s", e.seconds_to_next_attempt()},
            {"last_stderr", e.last_stderr()},
            {"stderr_tail", e.stderr_tail()},
            {"info", e.info()},
            {"stats", e.stats()}};
}

}  // namespace

nlohmann::json Server::stats_json() const {
    int active = 0, queued = 0, slots = 0, restarts = 0, losses = 0;
    std::size_t entries = 0, capacity = 0, bytes = 0;
    nlohmann::json models = nlohmann::json::object();
    for (const auto& m : models_.all()) {
        active += m->slots.active();
        queued += m->slots.queued();
        slots += m->slots.slots();
        restarts += m->engine.restarts();
        losses += m->engine.device_losses();
        entries += m->affinity.size();
        capacity += m->affinity.capacity();
        bytes += m->affinity.bytes();
        models[m->id] = {{"status", m->status()},
                         {"bytes", m->bytes},
                         {"active", m->slots.active()},
                         {"queued", m->slots.queued()},
                         {"slots", m->slots.slots()},
                         {"requests", m->requests.value},
                         {"prompt_tokens", m->prompt_tokens.value},
                         {"cached_tokens", m->cached_tokens.value},
                         {"completion_tokens", m->completion_tokens.value},
                         {"loads", m->loads.value},
                         {"unloads", m->unloads.value},
                         {"engine", engine_json(m->engine)}};
    }
    const Model& first = *models_.all().front();
    return {{"gateway",
             {{"uptime_s", std::chrono::duration<double>(Clock::now() - started_).count()},
              {"requests_total", metrics_.requests_total()},
              {"active", active},
              {"queued", queued},
              {"queue_limit", first.slots.max_queue()},
              {"slots", slots},
              {"restarts", restarts},
              {"device_losses", losses},
              {"tokens_in", metrics_.tokens_in.value},
              {"tokens_out", metrics_.tokens_out.value},
              {"affinity", {{"entries", entries}, {"capacity", capacity}, {"bytes", bytes}}}}},
            // The first model's engine (the only one with one --model), as before several models.
            {"engine", engine_json(first.engine)},
            {"models", models}};
}

awaitable<bool> Server::on_stats(Call& call) {
    for (const auto& m : models_.all()) m->engine.request_stats();
    const nlohmann::json stats = stats_json();
    co_await write_json(call.c, call.req, 200, stats, "stats");
    co_return true;
}

namespace {

nlohmann::json model_object(const std::string& id) {
    return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "inkling"}};
}

}  // namespace

awaitable<bool> Server::on_models(Call& call) {
    nlohmann::json list = nlohmann::json::object();
    list["object"] = "list";
    list["data"] = nlohmann::json::array();
    for (const auto& id : models_.ids()) list["data"].push_back(model_object(id));
    co_await write_json(call.c, call.req, 200, list, "models");
    co_return true;
}

// /v1/models/{id}: an unknown id is a 404 whatever the method.
awaitable<bool> Server::on_model(Call& call) {
    const std::string id = call.path.substr(11);
    if (!models_.find(id))
        throw ApiError(404, "invalid_request_error", "The model '" + id + "' does not exist", "model", "model_not_found");
    if (call.req.method() != http::verb::get) throw ApiError(405, "invalid_request_error", "use GET");
    const nlohmann::json model = model_object(id);
    co_await write_json(call.c, call.req, 200, model, "models");
    co_return true;
}

// x-session-id names the conversation when the client sends one (a balancer hashes the same
// header); it then picks the slot too. Otherwise the key is the conversation's identity hash.
void Server::conversation_key(const Request& req, GenerationRequest& g) {
    const std::string session(req["x-session-id"]);
    const bool usable = !session.empty() && session.size() <= 256 &&
                        std::all_of(session.begin(), session.end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
    if (usable && !g.slot_hint) {
        g.affinity = AffinityMap::key_of("x-session-id:" + session);
        g.conversation_key = session;
        return;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(g.affinity));
    g.conversation_key = hex;
}

awaitable<bool> Server::on_generation(Call& call) {
    const Dialect& dialect = *call.route.dialect;
    // Parsing, audio decoding and prompt rendering run on a worker thread: a long clip
    // takes seconds to resample, and the io thread serves every other connection.
    std::optional<GenerationRequest> parsed;
    std::optional<ApiError> refused;
    bool finished = false;
    auto done = std::make_shared<Signal>(io_.get_executor());
    const Request& req = call.req;
    asio::post(workers_, [&, done] {
        try {
            const nlohmann::json body = parse_body(req.body());
            GenerationRequest g = dialect.parse(body, o_.limits);
            keep_declared_key_order(g, req.body());  // a response_format schema's keys, as written
            if (g.prompt.find('\0') != std::string::npos)
                throw bad_request("the prompt contains a NUL character", dialect.prompt_param);
            // The engine's limit, checked here: bodies may be larger (audio arrives as
            // base64), rendered prompt text may not.
            if (g.prompt.size() > protocol::kDefaultLimits.max_prompt_bytes)
                throw bad_request("the prompt is " + std::to_string(g.prompt.size()) +
                                      " bytes once rendered; the engine takes at most " +
                                      std::to_string(protocol::kDefaultLimits.max_prompt_bytes),
                                  dialect.prompt_param);
            parsed = std::move(g);
        } catch (const ApiError& e) {
            refused = e;
        } catch (const std::exception& e) {
            refused = ApiError(500, "server_error", std::string("could not read the request: ") + e.what());
        }
        asio::post(io_, [&, done] {
            finished = true;
            done->notify();
        });
    });
    while (!finished) co_await done->wait();
    if (refused) throw *refused;
    conversation_key(call.req, *parsed);
    co_await generate(call.c, call.req, dialect, std::move(*parsed));
    co_return !call.c.disconnected && !call.c.close_after;
}

}  // namespace inkling::gateway
