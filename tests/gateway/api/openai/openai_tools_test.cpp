// Tool calls and log-probs on the OpenAI dialects, through the generation driver and the real
// formatters: the streamed tool_calls deltas assemble into the body's calls, log-probs cover
// the answer's tokens exactly (streamed chunks concatenated = the body's list), and the chat
// request's tool fields render TMLv0's bytes (docs/model.md, "Tools") or are refused naming
// the field.
#include <doctest/doctest.h>

#include <map>

#include "gateway/api/api_error.h"
#include "gateway/api/openai/dialect_chat.h"
#include "gateway/api/openai/dialect_completions.h"
#include "gateway/api/openai/openai_request.h"
#include "gateway/generation/tool_constraint.h"
#include "gateway/generation/tool_render.h"
#include "support/gateway_drive.h"

using namespace inkling::gateway;
using namespace inkling::gateway::test;
using nlohmann::json;

namespace {

GenerationRequest with_tools(bool stream) {
    GenerationRequest g;
    g.stream = stream;
    g.start_in_content = false;  // a bare <|message_model|>: the model picks text or a call
    g.tools.tools = {{"get_weather", "", json::object()}, {"get_time", "", json::object()}};
    g.tools.choice = ToolChoice::Auto;
    return g;
}

// Text, then two calls whose arguments straddle DATA frames.
const Script kTwoCalls{{"<|content_text|>", "Let me", " check.", "<|end_message|>", "<|message_model|>", "get_weather",
                        "<|content_invoke_tool_json|>", "{\"name\":\"get_weather\",\"args\":{\"city\":", "\"Oslo\"}}",
                        "<|end_message|>", "<|message_model|>", "get_", "time", "<|content_invoke_tool_json|>",
                        "{\"name\":\"get_time\",\"args\":{}}", "<|end_message|>"}};

// tool_calls deltas put together as openai-node's ChatCompletionStream does: keyed by
// index; id, type and name from the first delta; arguments appended.
json assemble_calls(const Events& e) {
    std::map<int, json> calls;
    for (const auto& j : e.events) {
        if (j["choices"].empty()) continue;
        const json& delta = j["choices"][0]["delta"];
        if (!delta.contains("tool_calls")) continue;
        for (const auto& c : delta["tool_calls"]) {
            const int i = c["index"];
            json& into = calls[i];
            if (!into.contains("id")) {  // the first delta of a call names it
                REQUIRE(c.contains("id"));
                CHECK(c["type"] == "function");
                into = {{"id", c["id"]}, {"type", "function"}, {"function", {{"name", c["function"]["name"]}, {"arguments", ""}}}};
            } else {
                CHECK_FALSE(c.contains("id"));
            }
            if (c["function"].contains("arguments"))
                into["function"]["arguments"] = into["function"]["arguments"].get<std::string>() + c["function"]["arguments"].get<std::string>();
        }
    }
    json list = json::array();
    for (auto& [_, c] : calls) list.push_back(c);
    return list;
}

inkling::protocol::TokenLogprobs tail(double lp, std::vector<std::pair<std::string, double>> alternatives) {
    inkling::protocol::TokenLogprobs t;
    t.logprob = lp;
    std::uint32_t id = 100;
    for (auto& [bytes, v] : alternatives) {
        t.top.emplace_back(id++, v);
        t.top_bytes.push_back(bytes);
    }
    return t;
}

}  // namespace

TEST_CASE("chat tool calls: two calls, streamed deltas assemble into the body's tool_calls") {
    const Run whole = drive(chat_dialect(), with_tools(false), kTwoCalls);
    const Run streamed = drive(chat_dialect(), with_tools(true), kTwoCalls);
    const json& choice = whole.body["choices"][0];
    CHECK(choice["finish_reason"] == "tool_calls");
    CHECK(choice["message"]["content"] == "Let me check.");
    const json& calls = choice["message"]["tool_calls"];
    REQUIRE(calls.size() == 2);
    CHECK(calls[0]["function"]["name"] == "get_weather");
    CHECK(calls[0]["function"]["arguments"] == R"({"city":"Oslo"})");
    CHECK(calls[1]["function"]["name"] == "get_time");
    CHECK(calls[1]["function"]["arguments"] == "{}");
    CHECK(calls[0]["id"].get<std::string>().starts_with("call_"));
    CHECK(calls[0]["id"] != calls[1]["id"]);

    const Events events = parse_sse(streamed.bytes);
    CHECK(events.done);
    json streamed_calls = assemble_calls(events);
    // The ids name the response, which differs between the two runs only by nothing here
    // (the same meta): they are equal too.
    CHECK(streamed_calls == calls);
    const Assembled text = assemble(events, true);
    CHECK(text.content == "Let me check.");
    CHECK(text.finish_reason == "tool_calls");
    CHECK(text.finishes == 1);
}

TEST_CASE("chat tool calls: a turn of calls only has content null; parallel_tool_calls false stops after one") {
    const Script only{{"lookup", "<|content_invoke_tool_json|>", "{\"name\":\"lookup\",\"args\":{\"q\":1}}", "<|end_message|>",
                       "<|message_model|>", "lookup", "<|content_invoke_tool_json|>", "{\"name\":\"lookup\",\"args\":{}}"}};
    GenerationRequest g = with_tools(false);
    g.tools.tools = {{"lookup", "", json::object()}};
    const Run both = drive(chat_dialect(), g, only);
    CHECK(both.body["choices"][0]["message"]["content"].is_null());
    CHECK(both.body["choices"][0]["message"]["tool_calls"].size() == 2);
    CHECK(both.stops.empty());
    g.tools.parallel = false;
    const Run one = drive(chat_dialect(), g, only);
    REQUIRE(one.body["choices"][0]["message"]["tool_calls"].size() == 1);
    CHECK(one.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == R"({"q":1})");
    CHECK(one.body["choices"][0]["finish_reason"] == "tool_calls");
    REQUIRE(one.stops.size() == 1);
    CHECK(one.stops[0] == 3);  // the call's <|end_message|>: the engine is told to STOP there
}

TEST_CASE("chat tool calls: with tool_choice none the output is text, markers dropped") {
    GenerationRequest g = with_tools(false);
    g.tools.choice = ToolChoice::None;
    const Run run = drive(chat_dialect(), g, kTwoCalls);
    const json& message = run.body["choices"][0]["message"];
    CHECK_FALSE(message.contains("tool_calls"));
    CHECK(run.body["choices"][0]["finish_reason"] == "stop");
    CHECK(message["content"].get<std::string>().find("get_weather{\"name\"") != std::string::npos);
}

TEST_CASE("chat log-probs: the answer's tokens only, alternatives sorted and cut, streamed = whole") {
    GenerationRequest g;
    g.start_in_content = false;
    g.logprobs = 2;
    Script s{{"think", "<|content_text|>", "Caf", "\xc3", "\xa9", "!", "END", "more"}};
    s.logprobs = {tail(-0.5, {{"think", -0.5}}), tail(-0.01, {{"<|content_text|>", -0.01}}),
                  tail(-1.0, {{"x", -3.0}, {"Caf", -1.0}, {"y", -0.9}}), tail(-0.2, {{"\xc3", -0.2}}),
                  tail(-0.3, {{"\xa9", -0.3}}), tail(-9.0, {{"!", -9.0}}), tail(-0.1, {}), tail(-0.1, {})};
    g.stop = {"END"};
    const Run whole = drive(chat_dialect(), g, s);
    const json& lp = whole.body["choices"][0]["logprobs"];
    REQUIRE(lp["content"].size() == 4);  // Caf, \xc3, \xa9, ! — not the reasoning, marker or stop
    CHECK(lp["content"][0]["token"] == "Caf");
    CHECK(lp["content"][0]["logprob"] == -1.0);
    CHECK(lp["content"][0]["bytes"] == json::array({67, 97, 102}));
    REQUIRE(lp["content"][0]["top_logprobs"].size() == 2);
    CHECK(lp["content"][0]["top_logprobs"][0]["token"] == "y");  // -0.9 first
    CHECK(lp["content"][0]["top_logprobs"][1]["token"] == "Caf");
    CHECK(lp["content"][1]["token"] == "bytes:\\xc3");  // half a character
    CHECK(lp["content"][1]["bytes"] == json::array({0xc3}));
    CHECK(lp["content"][3]["logprob"] == -9.0);
    CHECK(lp["refusal"].is_null());
    CHECK(whole.body["choices"][0]["message"]["content"] == "Caf\xc3\xa9!");

    g.stream = true;
    const Events events = parse_sse(drive(chat_dialect(), g, s).bytes);
    json concatenated = json::array();
    for (const auto& e : events.events) {
        if (e["choices"].empty() || !e["choices"][0].contains("logprobs") || e["choices"][0]["logprobs"].is_null()) continue;
        // A chunk's log-probs are of its own text's tokens: they ride with content.
        const json& c = e["choices"][0];
        CHECK((c["delta"].contains("content") || !c["finish_reason"].is_null()));
        for (const auto& t : c["logprobs"]["content"]) concatenated.push_back(t);
    }
    CHECK(concatenated == lp["content"]);
}

TEST_CASE("completions log-probs: tokens, token_logprobs, top_logprobs maps and text_offset") {
    GenerationRequest g;
    g.logprobs = 1;
    Script s{{"He", "llo", " w\xc3\xb6", "rld"}};
    s.logprobs = {tail(-0.1, {{"He", -0.1}, {"Ha", -2.0}}), tail(-0.2, {{"x", -0.1}}), tail(-0.3, {{" w\xc3\xb6", -0.3}}),
                  tail(-0.4, {{"rld", -0.4}})};
    const Run whole = drive(completions_dialect(), g, s);
    const json& lp = whole.body["choices"][0]["logprobs"];
    CHECK(lp["tokens"] == json::array({"He", "llo", " w\xc3\xb6", "rld"}));
    CHECK(lp["token_logprobs"] == json::array({-0.1, -0.2, -0.3, -0.4}));
    CHECK(lp["top_logprobs"][0] == json{{"He", -0.1}});
    CHECK(lp["top_logprobs"][1] == json({{"x", -0.1}, {"llo", -0.2}}));  // the chosen token is added
    CHECK(lp["text_offset"] == json::array({0, 2, 5, 8}));  // code points: ö is one
    g.stream = true;
    const Events events = parse_sse(drive(completions_dialect(), g, s).bytes);
    json tokens = json::array(), offsets = json::array();
    for (const auto& e : events.events)
        if (!e["choices"].empty() && !e["choices"][0]["logprobs"].is_null())
            for (std::size_t i = 0; i < e["choices"][0]["logprobs"]["tokens"].size(); ++i) {
                tokens.push_back(e["choices"][0]["logprobs"]["tokens"][i]);
                offsets.push_back(e["choices"][0]["logprobs"]["text_offset"][i]);
            }
    CHECK(tokens == lp["tokens"]);
    CHECK(offsets == lp["text_offset"]);
}

namespace {
GatewayLimits limits() {
    GatewayLimits l;
    l.model_ids = {"m"};
    return l;
}
json weather_tool() {
    return {{"type", "function"},
            {"function",
             {{"name", "get_weather"},
              {"description", "Weather now"},
              {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
}
std::string refusal(const json& body) {
    try {
        parse_chat_request(body, limits());
    } catch (const ApiError& e) {
        CHECK(e.status == 400);
        return e.param;
    }
    return "accepted";
}
}  // namespace

TEST_CASE("chat request: tools render the declaration; a call and its result render as the spec's history") {
    json body = {{"model", "m"},
                 {"tools", json::array({weather_tool()})},
                 {"messages",
                  json::array({{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "Oslo?"}},
                               {{"role", "assistant"},
                                {"content", nullptr},
                                {"tool_calls",
                                 json::array({{{"id", "call_1"},
                                               {"type", "function"},
                                               {"function", {{"name", "get_weather"}, {"arguments", "{ \"city\" : \"Oslo\" }"}}}}})}},
                               {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "3C, rain"}}})}};
    const GenerationRequest g = parse_chat_request(body, limits());
    CHECK(g.tools.choice == ToolChoice::Auto);
    CHECK(g.start_in_content);  // effort 0: text before any marker is the answer
    const std::string decl =
        R"([{"description":"Weather now","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"type":"object"},"type":"function"}])";
    CHECK(g.prompt ==
          "<|message_system|>tool_declare<|content_xml|>" + decl + "<|end_message|>"
          "<|message_system|><|content_text|>Be brief.<|end_message|>"
          "<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>"
          "<|message_user|><|content_text|>Oslo?<|end_message|>"
          "<|message_model|>get_weather<|content_invoke_tool_json|>{\"name\":\"get_weather\",\"args\":{\"city\":\"Oslo\"}}"
          "<|end_message|><|content_model_end_sampling|>"
          "<|message_tool|>get_weather<|content_text|>3C, rain<|end_message|><|message_model|>");
    // tool_choice none: no declaration, the answer channel opened as without tools.
    body["tool_choice"] = "none";
    const GenerationRequest none = parse_chat_request(body, limits());
    CHECK(none.prompt.find("tool_declare") == std::string::npos);
    CHECK(none.prompt.ends_with("<|message_model|><|content_text|>"));
    CHECK(none.start_in_content);
}

TEST_CASE("chat request: canonical JSON sorts keys at every depth, keeps non-ASCII, writes no spaces") {
    CHECK(canonical_json(json::parse(R"({"b":{"z":1,"a":[1.5,"\u00e9"]},"a":true})")) == "{\"a\":true,\"b\":{\"a\":[1.5,\"\xc3\xa9\"],\"z\":1}}");
    CHECK(tool_call_envelope("f", json::parse(R"({"y":1,"x":null})")) == R"({"name":"f","args":{"x":null,"y":1}})");
    CHECK(tool_declarations({{"f", "", json::object()}}) == R"([{"description":"","name":"f","parameters":{},"type":"function"}])");
}

TEST_CASE("chat request: bad tool fields are 400s naming the field; forced choices become the engine's constraint") {
    const json base = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
    auto with = [&](std::initializer_list<std::pair<const char*, json>> fields) {
        json b = base;
        for (const auto& [k, v] : fields) b[k] = v;
        return refusal(b);
    };
    const json tools = json::array({weather_tool()});
    CHECK(with({{"tools", tools}}) == "accepted");
    CHECK(with({{"tools", json::array({{{"type", "custom"}}})}}) == "tools[0].type");
    CHECK(with({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "bad name"}}}}})}}) == "tools[0].function.name");
    CHECK(with({{"tools", json::array({weather_tool(), weather_tool()})}}) == "tools[1].function.name");
    CHECK(with({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}})}}) ==
          "tools[0].function.parameters");
    CHECK(with({{"tool_choice", "auto"}}) == "tool_choice");  // no tools
    CHECK(with({{"tools", tools}, {"tool_choice", "sometimes"}}) == "tool_choice");
    CHECK(with({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "other"}}}}}}) ==
          "tool_choice.function.name");
    CHECK(with({{"functions", json::array()}}) == "functions");
    // A forced choice goes to the engine as the call's constraint (never as auto).
    json forced = base;
    forced["tools"] = tools;
    CHECK(parse_chat_request(forced, limits()).constraint.empty());
    forced["tool_choice"] = "required";
    CHECK(json::parse(parse_chat_request(forced, limits()).constraint)["type"] == "repeat");
    forced["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    CHECK(json::parse(parse_chat_request(forced, limits()).constraint)["items"][0]["text"] == "get_weather");
    CHECK(with({{"tools", tools}, {"parallel_tool_calls", "no"}}) == "parallel_tool_calls");
    json bad_args = base;
    bad_args["messages"].push_back({{"role", "assistant"},
                                    {"tool_calls", json::array({{{"id", "c"}, {"function", {{"name", "f"}, {"arguments", "{oops"}}}}})}});
    CHECK(refusal(bad_args) == "messages[1].tool_calls[0].function.arguments");
    CHECK(with({{"logprobs", true}, {"top_logprobs", 21}}) == "top_logprobs");
    CHECK(with({{"logprobs", true}, {"top_logprobs", 20}}) == "accepted");
}

TEST_CASE("completion request: logprobs is an integer in 0..5") {
    auto param = [](const json& lp) {
        try {
            const auto r = parse_completion_request({{"model", "m"}, {"prompt", "p"}, {"logprobs", lp}}, limits());
            return r.logprobs ? std::to_string(*r.logprobs) : std::string("none");
        } catch (const ApiError& e) {
            return e.param;
        }
    };
    CHECK(param(0) == "0");
    CHECK(param(5) == "5");
    CHECK(param(6) == "logprobs");
    CHECK(param(true) == "logprobs");
    CHECK(param(nullptr) == "none");
}

TEST_CASE("forced tool choices as the engine's constraint: the call's exact frame around the schema") {
    ToolUse use;
    use.tools = {{"get_weather", "", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}, {"ping", "", json::object()}};
    use.choice = ToolChoice::Named;
    use.name = "get_weather";
    const json named = json::parse(forced_call_constraint(use));
    const json weather_call = {
        {"type", "sequence"},
        {"items",
         json::array({{{"type", "text"}, {"text", "get_weather"}},
                      {{"type", "token"}, {"token", "<|content_invoke_tool_json|>"}},
                      {{"type", "text"}, {"text", "{\"name\":\"get_weather\",\"args\":"}},
                      {{"type", "json_schema"}, {"schema", use.tools[0].parameters}, {"whitespace", "none"}, {"key_order", "sorted"}},
                      {{"type", "text"}, {"text", "}"}},
                      {{"type", "token"}, {"token", "<|end_message|>"}}})}};
    CHECK(named == weather_call);
    use.choice = ToolChoice::Required;
    const json required = json::parse(forced_call_constraint(use));
    CHECK(required["type"] == "repeat");
    CHECK(required["min"] == 1);
    CHECK_FALSE(required.contains("max"));
    CHECK(required["separator"] == json{{"type", "token"}, {"token", "<|message_model|>"}});
    REQUIRE(required["item"]["items"].size() == 2);
    CHECK(required["item"]["items"][0] == weather_call);
    // A function without parameters takes {} exactly.
    CHECK(required["item"]["items"][1]["items"][3]["schema"] ==
          json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}});
    use.parallel = false;
    CHECK(json::parse(forced_call_constraint(use))["max"] == 1);
    use.choice = ToolChoice::Auto;
    CHECK(forced_call_constraint(use).empty());
}
