// Errors as the OpenAI API shapes them, built in one place: every handler throws an
// ApiError made by one of the named constructors below, and the HTTP layer turns it into a
// response (in the route's dialect, gateway/api/dialect.h).
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace inkling::gateway {

struct ApiError : std::runtime_error {
    ApiError(int status, std::string type, std::string message, std::string param = {}, std::string code = {},
             int retry_after = 0)
        : std::runtime_error(message),
          status(status),
          type(std::move(type)),
          param(std::move(param)),
          code(std::move(code)),
          retry_after(retry_after) {}
    int status;
    std::string type;   // invalid_request_error, authentication_error, rate_limit_error, …
    std::string param;  // the offending field, when there is one
    std::string code;   // context_length_exceeded, model_not_found, …
    int retry_after;    // seconds; sent as Retry-After when > 0

    nlohmann::json body() const {
        return {{"error",
                 {{"message", what()},
                  {"type", type},
                  {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                  {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
    }
};

// The named errors: every ApiError the gateway answers is made by one of these, so a status
// goes with its OpenAI type and the codes a client may key on are spelled in one place.
// (The dialects reshape them: gateway/api/anthropic/anthropic_format.h.)

// 400 invalid_request_error: the request is wrong (`param` names the field).
inline ApiError bad_request(std::string message, std::string param = {}, std::string code = {}) {
    return ApiError(400, "invalid_request_error", std::move(message), std::move(param), std::move(code));
}
// 401 authentication_error: no API key, or not the gateway's (--api-key).
inline ApiError invalid_api_key() {
    return ApiError(401, "authentication_error", "Incorrect API key provided", "", "invalid_api_key");
}
// 403 forbidden: a Host or an Origin the gateway does not serve.
inline ApiError forbidden(std::string message, std::string code = {}) {
    return ApiError(403, "forbidden", std::move(message), "", std::move(code));
}
// 404 invalid_request_error: no such path, or (model_not_found) no such model.
inline ApiError not_found(std::string message) { return ApiError(404, "invalid_request_error", std::move(message)); }
inline ApiError model_not_found(std::string message) {
    return ApiError(404, "invalid_request_error", std::move(message), "model", "model_not_found");
}
// 405 invalid_request_error: `message` says which methods the path takes.
inline ApiError method_not_allowed(std::string message) {
    return ApiError(405, "invalid_request_error", std::move(message));
}
// 413 invalid_request_error: the body is over --max-body.
inline ApiError payload_too_large(std::string message) {
    return ApiError(413, "invalid_request_error", std::move(message));
}
// 429 rate_limit_error, Retry-After 1: too many connections, a full queue or a busy engine
// (`code` says which).
inline ApiError rate_limited(std::string message, std::string code) {
    return ApiError(429, "rate_limit_error", std::move(message), "", std::move(code), 1);
}
// 500 server_error: the gateway's or the engine's fault, not worth retrying as is.
inline ApiError server_error(std::string message, std::string code = {}) {
    return ApiError(500, "server_error", std::move(message), "", std::move(code));
}
// 503 server_error: not now (a model or engine unavailable, an engine timeout, a drain);
// Retry-After `retry_after` seconds.
inline ApiError unavailable(std::string message, std::string code, int retry_after, std::string param = {}) {
    return ApiError(503, "server_error", std::move(message), std::move(param), std::move(code), retry_after);
}

}  // namespace inkling::gateway
