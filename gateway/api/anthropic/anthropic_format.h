// The Anthropic Messages API's shapes that are not the answer itself: errors and SSE framing.
// Errors: {"type":"error","error":{"type":…,"message":…}} with Anthropic's statuses and
// types (Anthropic's API reference, "Errors"); a server that cannot take the request now
// (queue full or timed out, engine busy) is 529 overloaded_error, as Anthropic's own overload,
// while 429 rate_limit_error stays a limit on one client (too many connections); a deadline
// the engine missed is 504 timeout_error. Mid-stream, the same object as an `error` event.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/api/api_error.h"

namespace inkling::gateway {

// One named SSE event: "event: <name>\ndata: <json>\n\n" (the Anthropic SDK drops events
// without a name).
std::string sse_event(std::string_view name, const nlohmann::json& data);

int anthropic_status(const ApiError& error);
// invalid_request_error, authentication_error, permission_error, not_found_error,
// request_too_large, rate_limit_error, api_error, timeout_error, overloaded_error.
const char* anthropic_error_type(int status);
nlohmann::json anthropic_error_body(const ApiError& error);

}  // namespace inkling::gateway
