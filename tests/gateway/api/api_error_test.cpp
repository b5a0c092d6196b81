// The named errors (gateway/api/api_error.h): each one's status, OpenAI type, param, code and
// Retry-After, and the body they make. Clients and the dialects key on these.
#include <doctest/doctest.h>

#include <string>

#include "gateway/api/api_error.h"

using namespace inkling::gateway;
using nlohmann::json;

namespace {
void same(const ApiError& e, int status, const char* type, const char* param, const char* code, int retry_after) {
    CAPTURE(e.what());
    CHECK(e.status == status);
    CHECK(e.type == type);
    CHECK(e.param == param);
    CHECK(e.code == code);
    CHECK(e.retry_after == retry_after);
}
}  // namespace

TEST_CASE("each named error carries its status, type, code and Retry-After") {
    same(bad_request("m"), 400, "invalid_request_error", "", "", 0);
    same(bad_request("m", "messages", "context_length_exceeded"), 400, "invalid_request_error", "messages",
         "context_length_exceeded", 0);
    same(invalid_api_key(), 401, "authentication_error", "", "invalid_api_key", 0);
    CHECK(std::string(invalid_api_key().what()) == "Incorrect API key provided");
    same(forbidden("m"), 403, "forbidden", "", "", 0);
    same(forbidden("m", "origin_not_allowed"), 403, "forbidden", "", "origin_not_allowed", 0);
    same(not_found("m"), 404, "invalid_request_error", "", "", 0);
    same(model_not_found("m"), 404, "invalid_request_error", "model", "model_not_found", 0);
    same(method_not_allowed("use GET"), 405, "invalid_request_error", "", "", 0);
    same(payload_too_large("m"), 413, "invalid_request_error", "", "", 0);
    same(rate_limited("m", "queue_full"), 429, "rate_limit_error", "", "queue_full", 1);
    same(server_error("m"), 500, "server_error", "", "", 0);
    same(server_error("m", "engine_crashed"), 500, "server_error", "", "engine_crashed", 0);
    same(unavailable("m", "engine_timeout", 1), 503, "server_error", "", "engine_timeout", 1);
    same(unavailable("m", "model_unavailable", 5, "model"), 503, "server_error", "model", "model_unavailable", 5);
}

TEST_CASE("an error's body is OpenAI's: message, type, and param and code or null") {
    CHECK(model_not_found("The model 'x' does not exist").body() ==
          json{{"error",
                {{"message", "The model 'x' does not exist"}, {"type", "invalid_request_error"}, {"param", "model"},
                 {"code", "model_not_found"}}}});
    CHECK(rate_limited("too many connections; retry", "too_many_connections").body().dump() ==
          R"({"error":{"code":"too_many_connections","message":"too many connections; retry","param":null,"type":"rate_limit_error"}})");
}
