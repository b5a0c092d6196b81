// OpenAI request validation: chat and completions bodies, base64 fields, cache_slot.
#include <doctest/doctest.h>

#include "gateway/api/api_error.h"
#include "gateway/api/openai/openai_request.h"

using namespace inkling::gateway;
using nlohmann::json;

namespace {
GatewayLimits limits() {
    GatewayLimits l;
    l.model_ids = {"m"};
    l.max_tokens_cap = 100;
    return l;
}

int status_of(const json& body, bool chat = true) {
    try {
        chat ? parse_chat_request(body, limits()) : parse_completion_request(body, limits());
    } catch (const ApiError& e) {
        return e.status;
    }
    return 200;
}
}  // namespace

TEST_CASE("chat requests render TMLv0 and validate every field") {
    json ok = {{"model", "m"}, {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}}};
    auto r = parse_chat_request(ok, limits());
    CHECK(r.prompt ==
          "<|message_system|><|content_text|>Be brief.<|end_message|>"
          "<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>"
          "<|message_user|><|content_text|>Hi<|end_message|><|message_model|><|content_text|>");
    CHECK(r.max_tokens == 100u);
    CHECK(r.start_in_content);
    json effort = ok;
    effort["reasoning_effort"] = "high";
    effort["max_completion_tokens"] = 7;
    effort["max_tokens"] = 50;
    auto e = parse_chat_request(effort, limits());
    CHECK(!e.start_in_content);
    CHECK(e.max_tokens == 7u);
    CHECK(e.prompt.ends_with("<|message_model|>"));
    // Every turn of one conversation maps to the same slot key; another conversation does not.
    json later = ok;
    later["messages"].push_back({{"role", "assistant"}, {"content", "Hello."}});
    later["messages"].push_back({{"role", "user"}, {"content", "More?"}});
    CHECK(parse_chat_request(later, limits()).affinity == r.affinity);
    json other = ok;
    other["messages"][1]["content"] = "Something else";
    CHECK(parse_chat_request(other, limits()).affinity != r.affinity);
    // Every bad field is a 4xx.
    auto with = [&](const char* key, json v) {
        json b = ok;
        b[key] = v;
        return status_of(b);
    };
    CHECK(with("model", "other") == 404);
    CHECK(with("model", 3) == 400);
    CHECK(with("n", 2) == 400);
    CHECK(with("temperature", 2.5) == 400);
    CHECK(with("temperature", "hot") == 400);
    CHECK(with("top_p", 0) == 400);
    CHECK(with("max_tokens", 0) == 400);
    CHECK(with("max_tokens", "many") == 400);
    CHECK(with("stop", json::array({"a", "b", "c", "d", "e"})) == 400);
    CHECK(with("stop", "") == 400);
    CHECK(with("stream", "yes") == 400);
    CHECK(with("messages", json::array()) == 400);
    CHECK(with("messages", json::array({{{"role", "wizard"}, {"content", "x"}}})) == 400);
    CHECK(with("messages", json::array({{{"role", "user"}, {"content", 5}}})) == 400);
    CHECK(with("tools", json::array({{{"type", "function"}}})) == 400);
    CHECK(with("reasoning_effort", "extreme") == 400);
    CHECK(with("frequency_penalty", 0.5) == 400);
    CHECK(with("logprobs", 1) == 400);        // chat: a boolean
    CHECK(with("top_logprobs", 3) == 400);    // without logprobs: true
    CHECK(status_of(json::array()) == 400);
    CHECK(status_of({{"messages", ok["messages"]}}) == 400);
}

TEST_CASE("completion requests and base64") {
    CHECK(parse_completion_request({{"model", "m"}, {"prompt", "abc"}}, limits()).prompt == "abc");
    CHECK(status_of({{"model", "m"}, {"prompt", json::array({"a", "b"})}}, false) == 400);
    CHECK(status_of({{"model", "m"}, {"prompt", ""}}, false) == 400);
    CHECK(decode_base64("aGVsbG8=", "x") == "hello");
    CHECK_THROWS_WITH_AS(decode_base64("aGV$bG8=", "x"), "'x' is not valid base64 (bad byte at offset 3)", ApiError);
    CHECK_THROWS_WITH_AS(decode_base64("aGVsbG8=x", "x"), "'x' is not valid base64 (bad byte at offset 8)", ApiError);
    CHECK_THROWS_WITH_AS(decode_base64("aGVsb", "x"), "'x' is not valid base64 (bad length)", ApiError);
}

TEST_CASE("cache_slot is checked in its own width: 2^32 is not slot 0") {
    auto body = [](json slot) {
        return json{{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"cache_slot", slot}};
    };
    CHECK(parse_chat_request(body(3), limits()).slot_hint == 3);
    CHECK(parse_chat_request(body(65535), limits()).slot_hint == 65535);
    CHECK(status_of(body(65536)) == 400);
    CHECK(status_of(body(4294967296ull)) == 400);
    CHECK(status_of(body(-1)) == 400);
    CHECK(status_of(body(1.5)) == 400);
}
