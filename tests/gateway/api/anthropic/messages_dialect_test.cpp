// The Anthropic Messages dialect's formatter (gateway/api/anthropic/dialect_messages.cpp)
// driven by the generation driver: the named SSE events come in the order the SDK's
// MessageStream demands and assemble into the same Message as the non-streaming body; stop
// reasons, usage, the thinking blocks, and errors in Anthropic's shape and statuses.
#include <doctest/doctest.h>

#include "gateway/api/anthropic/anthropic_format.h"
#include "gateway/api/anthropic/dialect_messages.h"
#include "support/gateway_drive.h"

using namespace inkling::gateway;
using namespace inkling::gateway::test;
using nlohmann::json;
namespace protocol = inkling::protocol;

namespace {

struct Event {
    std::string name;
    json data;
};

// "event: NAME\ndata: JSON\n\n", each event's name equal to its JSON type.
std::vector<Event> read_events(const std::string& bytes) {
    std::vector<Event> out;
    std::size_t at = 0;
    while (at < bytes.size()) {
        const std::string event = next_sse_event(bytes, at);
        REQUIRE_MESSAGE(event.starts_with("event: "), "an event without a name: " << event);
        const std::size_t nl = event.find('\n');
        REQUIRE(nl != std::string::npos);
        REQUIRE(event.compare(nl + 1, 6, "data: ") == 0);
        Event e{event.substr(7, nl - 7), json::parse(event.substr(nl + 7))};
        CHECK(e.data["type"] == e.name);
        out.push_back(std::move(e));
    }
    return out;
}

// The Message a stream makes, put together as the SDK's MessageStream does, failing on
// anything it would reject or silently lose: an event before message_start, a block index
// out of order, a delta that does not fit its block, a message_delta without usage, a
// missing message_stop.
json assemble(const std::vector<Event>& events) {
    REQUIRE(!events.empty());
    REQUIRE(events.front().name == "message_start");
    json message = events.front().data["message"];
    CHECK(message["content"] == json::array());
    CHECK(message["stop_reason"].is_null());
    REQUIRE(message["usage"].is_object());
    bool open = false, stopped = false;
    std::string partial_json;
    for (std::size_t i = 1; i < events.size(); ++i) {
        const auto& [name, d] = events[i];
        CAPTURE(name);
        REQUIRE_MESSAGE(!stopped, "an event after message_stop");
        if (name == "ping") continue;
        if (name == "content_block_start") {
            REQUIRE(!open);
            CHECK(d["index"] == message["content"].size());
            message["content"].push_back(d["content_block"]);
            open = true;
        } else if (name == "content_block_delta") {
            REQUIRE(open);
            REQUIRE(d["index"] == message["content"].size() - 1);
            json& block = message["content"].back();
            const json& delta = d["delta"];
            if (delta["type"] == "text_delta") {
                REQUIRE(block["type"] == "text");
                block["text"] = block["text"].get<std::string>() + delta["text"].get<std::string>();
            } else if (delta["type"] == "input_json_delta") {
                REQUIRE(block["type"] == "tool_use");
                partial_json += delta["partial_json"].get<std::string>();
            } else if (delta["type"] == "thinking_delta") {
                REQUIRE(block["type"] == "thinking");
                block["thinking"] = block["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
            } else {
                REQUIRE(delta["type"] == "signature_delta");
                REQUIRE(block["type"] == "thinking");
                block["signature"] = delta["signature"];
            }
        } else if (name == "content_block_stop") {
            REQUIRE(open);
            CHECK(d["index"] == message["content"].size() - 1);
            // A tool_use block's input is its fragments joined and parsed, once it stops.
            json& block = message["content"].back();
            if (block["type"] == "tool_use" && !partial_json.empty()) block["input"] = json::parse(partial_json);
            partial_json.clear();
            open = false;
        } else if (name == "message_delta") {
            REQUIRE(!open);
            REQUIRE(d["usage"].contains("output_tokens"));
            for (const auto& [k, v] : d["usage"].items()) message["usage"][k] = v;
            message["stop_reason"] = d["delta"]["stop_reason"];
            message["stop_sequence"] = d["delta"]["stop_sequence"];
        } else {
            REQUIRE(name == "message_stop");
            stopped = true;
        }
    }
    CHECK_MESSAGE(stopped, "no message_stop");
    return message;
}

std::vector<std::string> names(const std::vector<Event>& events) {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.name);
    return out;
}

GenerationRequest request(bool stream, std::uint64_t max_tokens = 64) {
    GenerationRequest g;
    g.stream = stream;
    g.max_tokens = max_tokens;
    return g;
}

// Both ways: the body, and the stream's events.
struct Both {
    json body;
    std::vector<Event> events;
};

Both run(GenerationRequest g, const Script& s) {
    g.stream = false;
    Both b{drive(messages_dialect(), g, s).body, {}};
    g.stream = true;
    b.events = read_events(drive(messages_dialect(), g, s).bytes);
    return b;
}

Script script(std::vector<std::string> tokens) {
    Script s;
    s.tokens = std::move(tokens);
    return s;
}

const Script kThinking = script({"Let me", " think.", "<|content_text|>", "Caf", "\xc3", "\xa9", " ok", "<|end_message|>"});

}  // namespace

TEST_CASE("messages: the stream assembles into the non-streaming Message, thinking block first") {
    GenerationRequest g = request(false);
    g.start_in_content = false;  // thinking is on: the model starts in its reasoning
    const Both b = run(g, kThinking);
    CHECK(b.body["id"] == "id-1");
    CHECK(b.body["type"] == "message");
    CHECK(b.body["role"] == "assistant");
    CHECK(b.body["model"] == "m");
    const json content = json::array({{{"type", "thinking"}, {"thinking", "Let me think."}, {"signature", ""}},
                                      {{"type", "text"}, {"text", "Caf\xc3\xa9 ok"}}});
    CHECK(b.body["content"] == content);
    CHECK(b.body["stop_reason"] == "end_turn");
    CHECK(b.body["stop_sequence"].is_null());
    CHECK(assemble(b.events) == b.body);
    // The thinking block's signature comes just before its stop.
    const auto n = names(b.events);
    const auto stop0 = std::find(n.begin(), n.end(), "content_block_stop") - n.begin();
    REQUIRE(stop0 > 0);
    CHECK(b.events[static_cast<std::size_t>(stop0) - 1].data["delta"]["type"] == "signature_delta");
}

TEST_CASE("messages: events in Anthropic's order: message_start, ping, one block's start/deltas/stop, message_delta, message_stop") {
    const Both b = run(request(true), script({"Hel", "lo", "<|end_message|>"}));
    CHECK(names(b.events) == std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                                      "content_block_delta", "content_block_stop", "message_delta",
                                                      "message_stop"});
    CHECK(b.events[2].data["content_block"] == json({{"type", "text"}, {"text", ""}}));
    CHECK(b.events[2].data["index"] == 0);
    CHECK(b.events[3].data["delta"] == json({{"type", "text_delta"}, {"text", "Hel"}}));
    CHECK(assemble(b.events)["content"] == json::array({{{"type", "text"}, {"text", "Hello"}}}));
}

TEST_CASE("messages: every switch of channel is a new block, indexes 0, 1, 2 in order") {
    GenerationRequest g = request(false);
    g.start_in_content = false;
    const Both b = run(g, script({"a", "<|content_text|>", "b", "<|content_thinking|>", "c"}));
    REQUIRE(b.body["content"].size() == 3);
    CHECK(b.body["content"][2]["type"] == "thinking");
    CHECK(assemble(b.events) == b.body);
}

TEST_CASE("messages: stop_reason end_turn, max_tokens, model_context_window_exceeded, stop_sequence with the match") {
    Script cut = script({"a", "b"});
    cut.length_limited = true;
    // max_tokens reached: the client's limit.
    const Both at_limit = run(request(false, 2), cut);
    CHECK(at_limit.body["stop_reason"] == "max_tokens");
    CHECK(assemble(at_limit.events)["stop_reason"] == "max_tokens");
    // Length-limited below max_tokens: the engine's context room ran out.
    const Both context = run(request(false, 64), cut);
    CHECK(context.body["stop_reason"] == "model_context_window_exceeded");
    CHECK(assemble(context.events)["stop_reason"] == "model_context_window_exceeded");
    const Both ended = run(request(false), script({"a", "b"}));
    CHECK(ended.body["stop_reason"] == "end_turn");
    CHECK(ended.body["stop_sequence"].is_null());
    // Several stop sequences: the one that matched is named; the text before it is the answer.
    GenerationRequest g = request(false);
    g.stop = {"zz", "wor", "o w"};
    const Both stopped = run(g, script({"hel", "lo w", "orld"}));
    CHECK(stopped.body["stop_reason"] == "stop_sequence");
    CHECK(stopped.body["stop_sequence"] == "o w");
    CHECK(stopped.body["content"] == json::array({{{"type", "text"}, {"text", "hell"}}}));
    CHECK(assemble(stopped.events) == stopped.body);
    // Of two that start at one place, the shorter (the one a stream completes first).
    g.stop = {"abc", "ab"};
    CHECK(run(g, script({"xabcd"})).body["stop_sequence"] == "ab");
}

TEST_CASE("messages: usage splits the prompt into prefilled and reused tokens; output_tokens in message_delta") {
    Script s = script({"x", "y", "z"});
    s.prompt_tokens = 40;
    s.reused = 25;
    const Both b = run(request(false), s);
    const json usage = {{"input_tokens", 15}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 25},
                        {"output_tokens", 3}};
    CHECK(b.body["usage"] == usage);
    CHECK(b.events.front().data["message"]["usage"]["input_tokens"] == 15);
    CHECK(b.events.front().data["message"]["usage"]["output_tokens"] == 0);  // none yet
    const auto delta = std::find_if(b.events.begin(), b.events.end(), [](const Event& e) { return e.name == "message_delta"; });
    REQUIRE(delta != b.events.end());
    CHECK(delta->data["usage"] == usage);
    CHECK(assemble(b.events)["usage"] == usage);
}

TEST_CASE("messages: thinking display omitted sends thinking blocks without their text, pings meanwhile") {
    GenerationRequest g = request(false);
    g.start_in_content = false;
    g.omit_reasoning = true;
    Script s;
    for (int i = 0; i < 70; ++i) s.tokens.push_back("t");
    s.tokens.push_back("<|content_text|>");
    s.tokens.push_back("answer");
    const Both b = run(g, s);
    CHECK(b.body["content"] == json::array({{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}},
                                            {{"type", "text"}, {"text", "answer"}}}));
    CHECK(assemble(b.events) == b.body);
    int thinking_deltas = 0, pings = 0;
    for (const auto& e : b.events) {
        if (e.name == "ping") ++pings;
        if (e.name == "content_block_delta" && e.data["delta"]["type"] == "thinking_delta") ++thinking_deltas;
    }
    CHECK(thinking_deltas == 0);
    CHECK(pings == 1 + 70 / 32);  // the opening one, then one per 32 omitted pieces
}

TEST_CASE("messages: tool calls are tool_use blocks (ids, names, parsed input), streamed as input_json_delta; stop_reason tool_use") {
    GenerationRequest g = request(false);
    g.tools.tools = {{"get_weather", "", json::object()}, {"get_time", "", json::object()}};
    g.tools.choice = ToolChoice::Auto;
    g.start_in_content = false;
    const Script s = script({"<|content_text|>", "Checking.", "<|end_message|>", "<|message_model|>", "get_weather",
                    "<|content_invoke_tool_json|>", "{\"name\": \"get_weather\", ", "\"args\": {\"city\": \"Ber", "gen\"}}",
                    "<|end_message|>", "<|message_model|>", "get_time", "<|content_invoke_tool_json|>",
                    "{\"name\": \"get_time\", \"args\": {}}", "<|end_message|>"});
    const Both b = run(g, s);
    const json& content = b.body["content"];
    REQUIRE(content.size() == 3);
    CHECK(content[0] == json({{"type", "text"}, {"text", "Checking."}}));
    CHECK(content[1]["type"] == "tool_use");
    CHECK(content[1]["name"] == "get_weather");
    CHECK(content[1]["input"] == json({{"city", "Bergen"}}));
    CHECK(content[2]["name"] == "get_time");
    CHECK(content[2]["input"] == json::object());
    CHECK(content[1]["id"] == "toolu_id-1_0");  // the message id after its "msg_" (this one has none), then the index
    CHECK(content[1]["id"] != content[2]["id"]);
    CHECK(b.body["stop_reason"] == "tool_use");
    CHECK(assemble(b.events) == b.body);
    const auto start = std::find_if(b.events.begin(), b.events.end(), [](const Event& e) {
        return e.name == "content_block_start" && e.data["content_block"]["type"] == "tool_use";
    });
    REQUIRE(start != b.events.end());
    CHECK(start->data["content_block"]["input"] == json::object());
    CHECK(start->data["index"] == 1);
    // disable_parallel_tool_use: the turn ends after the first call.
    g.tools.parallel = false;
    const Both one = run(g, s);
    REQUIRE(one.body["content"].size() == 2);
    CHECK(one.body["stop_reason"] == "tool_use");
    CHECK(assemble(one.events) == one.body);
}

TEST_CASE("messages: a call whose arguments do not parse keeps the model's text as its input") {
    GenerationRequest g = request(false);
    g.tools.tools = {{"f", "", json::object()}};
    g.tools.choice = ToolChoice::Auto;
    g.start_in_content = false;
    const json body = drive(messages_dialect(), g,
                            script({"<|message_model|>", "f", "<|content_invoke_tool_json|>",
                                    "{\"name\": \"f\", \"args\": {\"x\": tru", "<|end_message|>"}))
                          .body;
    REQUIRE(body["content"].size() == 1);
    CHECK(body["content"][0]["type"] == "tool_use");
    CHECK(body["content"][0]["input"].is_string());
}

TEST_CASE("messages: an empty answer is a Message with no content blocks, streamed or not") {
    const Both b = run(request(false), script({"<|end_message|>"}));
    CHECK(b.body["content"] == json::array());
    CHECK(assemble(b.events) == b.body);
}

TEST_CASE("messages: errors are Anthropic error objects with Anthropic's statuses") {
    struct Case {
        ApiError error;
        int status;
        const char* type;
    };
    const Case cases[] = {
        {bad_request("'max_tokens' is required", "max_tokens"), 400, "invalid_request_error"},
        {invalid_api_key(), 401, "authentication_error"},
        {forbidden("Host header not allowed"), 403, "permission_error"},
        {model_not_found("no model"), 404, "not_found_error"},
        {method_not_allowed("use POST"), 405, "invalid_request_error"},
        {payload_too_large("too large"), 413, "request_too_large"},
        // A limit on one client is a rate limit; the server out of room is overloaded (529).
        {rate_limited("too many connections", "too_many_connections"), 429, "rate_limit_error"},
        {rate_limited("the queue is full; retry later", "queue_full"), 529, "overloaded_error"},
        {rate_limited("timed out waiting for a slot", "queue_timeout"), 529, "overloaded_error"},
        {engine_refusal({"g1", protocol::ErrorCode::SlotBusy, ""}), 529, "overloaded_error"},
        {generation_failure("no frame", "engine_timeout"), 504, "timeout_error"},
        {unavailable("the engine is not available", "engine_unavailable", 2), 503, "api_error"},
        {server_error("internal error"), 500, "api_error"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.error.what());
        const Dialect& d = messages_dialect();
        CHECK(status_of(d, c.error) == c.status);
        CHECK(d.error_body(c.error) == json({{"type", "error"}, {"error", {{"type", c.type}, {"message", c.error.what()}}}}));
        CHECK(count_tokens_dialect().error_body(c.error) == d.error_body(c.error));
        CHECK(status_of(count_tokens_dialect(), c.error) == c.status);
    }
}

TEST_CASE("messages: a failure after the 200 is an error event and the stream ends without message_stop") {
    GenerationRequest g = request(true);
    auto f = messages_dialect().make(g, {"id-1", 1, "m"});
    GenerationDriver drv(*f, driver_options(g, true));
    std::string bytes = drv.accepted({"g1", 2, 0});
    bytes += drv.data("partial").bytes;
    const auto end = drv.failed(generation_failure("the engine stopped (killed by signal 9)"));
    CHECK(!end.complete);
    bytes += end.bytes;
    const auto events = read_events(bytes);
    REQUIRE(!events.empty());
    CHECK(events.back().name == "error");
    CHECK(events.back().data == json({{"type", "error"},
                                      {"error", {{"type", "api_error"},
                                                 {"message", "generation failed: the engine stopped (killed by signal 9)"}}}}));
    for (const auto& e : events) CHECK(e.name != "message_stop");
    // Not streaming: the error is the response, in the dialect's shape.
    g.stream = false;
    auto quiet_f = messages_dialect().make(g, {"id-2", 1, "m"});
    GenerationDriver quiet(*quiet_f, driver_options(g, true));
    CHECK(quiet.accepted({"g2", 2, 0}).empty());
    const auto failed = quiet.failed(generation_failure("x"));
    REQUIRE(failed.error);
    CHECK(messages_dialect().error_body(*failed.error)["error"]["type"] == "api_error");
}

TEST_CASE("count_tokens: the body is the engine's count of the prompt; CONTEXT_EXCEEDED's count is read") {
    Answer a;
    a.usage.prompt_tokens = 123;
    a.usage.cached_tokens = 100;  // a count is of the whole prompt, reused or not
    const auto f = count_tokens_dialect().make({}, {"count_1", 1, "m"});
    CHECK(f->body(a) == json({{"input_tokens", 123}}));
    using protocol::ErrorCode;
    CHECK(context_exceeded_prompt_tokens({"g1", ErrorCode::ContextExceeded, "prompt_tokens=5000 requested=5001 capacity=4096"}) ==
          5000u);
    CHECK(!context_exceeded_prompt_tokens({"g1", ErrorCode::ContextExceeded, "4100 > 4096"}));
    CHECK(!context_exceeded_prompt_tokens({"g1", ErrorCode::ContextExceeded, "prompt_tokens=12x"}));
    CHECK(!context_exceeded_prompt_tokens({"g1", ErrorCode::BadRequest, "prompt_tokens=5"}));
}
