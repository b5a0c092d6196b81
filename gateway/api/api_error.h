// Errors as the OpenAI API shapes them, built in one place: every handler throws an
// ApiError and the HTTP layer turns it into a response.
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

inline ApiError bad_request(std::string message, std::string param = {}, std::string code = {}) {
    return ApiError(400, "invalid_request_error", std::move(message), std::move(param), std::move(code));
}

}  // namespace inkling::gateway
