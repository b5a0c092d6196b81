#include "gateway/api/anthropic/anthropic_format.h"

#include "gateway/api/openai/openai_format.h"

namespace inkling::gateway {

using nlohmann::json;

std::string sse_event(std::string_view name, const json& data) {
    return "event: " + std::string(name) + "\ndata: " + dump_json(data) + "\n\n";
}

int anthropic_status(const ApiError& error) {
    if (error.code == "queue_full" || error.code == "queue_timeout" || error.code == "engine_busy") return 529;
    if (error.code == "engine_timeout") return 504;
    return error.status;
}

const char* anthropic_error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 504: return "timeout_error";
    case 529: return "overloaded_error";
    default: break;
    }
    return status >= 500 ? "api_error" : "invalid_request_error";
}

json anthropic_error_body(const ApiError& error) {
    return {{"type", "error"},
            {"error", {{"type", anthropic_error_type(anthropic_status(error))}, {"message", error.what()}}}};
}

}  // namespace inkling::gateway
