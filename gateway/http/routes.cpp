// The handler table: each path's access (public or API key), methods and handler, and the
// handlers that are not health or metrics (health.cpp): CORS preflight, the web UI's files,
// the model list, and the generation routes. A generation route names its dialect
// (gateway/api/dialect.h): it parses the body, shapes the answer and every error on that
// route, so a new API plugs in as one table row and one dialect.
#include <algorithm>
#include <cstdio>

#include "gateway/api/anthropic/dialect_messages.h"
#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"
#include "gateway/api/openai/dialect_chat.h"
#include "gateway/api/openai/dialect_completions.h"
#include "gateway/api/openai/openai_request.h"
#include "gateway/http/connection.h"
#include "gateway/http/cors_headers.h"
#include "gateway/http/routes.h"
#include "gateway/http/server.h"
#include "gateway/http/web_assets.h"
#include "protocol/limits.h"

namespace inkling::gateway {

using Response = http::response<http::string_body>;

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
    if (!models_.find(id)) throw model_not_found("The model '" + id + "' does not exist");
    if (call.req.method() != http::verb::get) throw method_not_allowed("use GET");
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
            refused = server_error(std::string("could not read the request: ") + e.what());
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
