// response_format on chat requests: the envelope refused field by field, schemas the engine
// cannot enforce refused before a slot (naming the field and the construct), the constraint
// the gateway sends — compiled by the engine's own compiler and run by its matcher: the
// answer's JSON then <|end_message|> is accepted, free text is not — together with tools
// (forced, auto), the schema's keys kept in the client's order, and /v1/completions' refusal.
#include <doctest/doctest.h>

#include <map>
#include <variant>

#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"
#include "gateway/api/openai/openai_request.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"

using namespace inkling::gateway;
using nlohmann::json;

namespace {

GatewayLimits limits() {
    GatewayLimits l;
    l.model_ids = {"m"};
    return l;
}

json chat(json extra) {
    json body = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "Describe Oslo as JSON."}}})}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return body;
}

// The param and message of the 400 the body gets; {"accepted", ""} when it is served.
std::pair<std::string, std::string> refusal(const json& body, bool chat_route = true) {
    try {
        if (chat_route) parse_chat_request(body, limits());
        else parse_completion_request(body, limits());
    } catch (const ApiError& e) {
        CHECK(e.status == 400);
        CHECK(e.type == "invalid_request_error");
        return {e.param, e.what()};
    }
    return {"accepted", ""};
}

const std::map<std::string, std::int32_t> kSpecial = {
    {"<|end_message|>", 1}, {"<|content_text|>", 2}, {"<|message_model|>", 3}, {"<|content_invoke_tool_json|>", 4}};

struct Tok {
    const char* text;
};
using Piece = std::variant<std::string, Tok>;

// The output `pieces` against the request's constraint, compiled as the engine compiles it.
bool matches(const GenerationRequest& g, const std::vector<Piece>& pieces) {
    auto grammar = inkling::grammar::compile_constraint(
        g.constraint, [](const std::string& t) { return kSpecial.count(t) ? kSpecial.at(t) : -1; }, 0);
    inkling::grammar::Matcher m(grammar);
    for (const auto& p : pieces) {
        const bool ok = std::holds_alternative<std::string>(p) ? m.accept_bytes(std::get<std::string>(p))
                                                               : m.accept_token(kSpecial.at(std::get<Tok>(p).text));
        if (!ok) return false;
    }
    return m.can_end();
}

const json kCity = json::parse(R"({"type":"object","properties":{"name":{"type":"string"},"pop":{"type":"integer"}},
    "required":["name","pop"],"additionalProperties":false})");
json schema_format(const json& schema) {
    return {{"type", "json_schema"}, {"json_schema", {{"name", "city"}, {"schema", schema}, {"strict", true}}}};
}
json weather_tool() {
    return {{"type", "function"},
            {"function",
             {{"name", "get_weather"},
              {"parameters", json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"],
                  "additionalProperties":false})")}}}};
}

}  // namespace

TEST_CASE("response_format: text, absent and null send no constraint") {
    for (const json& rf : {json{{"type", "text"}}, json(nullptr)}) {
        const GenerationRequest g = parse_chat_request(chat({{"response_format", rf}}), limits());
        CHECK(g.constraint.empty());
        CHECK(!g.format.json());
    }
    CHECK(parse_chat_request(chat(json::object()), limits()).constraint.empty());
}

TEST_CASE("response_format json_schema: the answer is JSON valid against the schema, then the end of the message") {
    const GenerationRequest g = parse_chat_request(chat({{"response_format", schema_format(kCity)}}), limits());
    CHECK(g.format.kind == ResponseFormat::Kind::JsonSchema);
    CHECK(g.format.name == "city");
    CHECK(g.format.strict);
    CHECK(g.prompt.ends_with("<|message_model|><|content_text|>"));
    CHECK(matches(g, {std::string(R"({"name":"Oslo","pop":709000})"), Tok{"<|end_message|>"}}));
    CHECK(matches(g, {std::string("{\n  \"name\": \"Oslo\",\n  \"pop\": 1\n}"), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string(R"({"name":"Oslo"})"), Tok{"<|end_message|>"}}));             // pop is required
    CHECK(!matches(g, {std::string(R"({"name":"Oslo","pop":1,"x":2})"), Tok{"<|end_message|>"}}));  // no extras
    CHECK(!matches(g, {std::string("Oslo is a city."), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string(R"({"name":"Oslo","pop":1})")}));  // the message must end
}

TEST_CASE("response_format json_object: any JSON object, nothing else") {
    const GenerationRequest g = parse_chat_request(chat({{"response_format", {{"type", "json_object"}}}}), limits());
    CHECK(g.format.kind == ResponseFormat::Kind::JsonObject);
    CHECK(matches(g, {std::string(R"({"a":[1,{"b":null}],"c":"d"})"), Tok{"<|end_message|>"}}));
    CHECK(matches(g, {std::string("{}"), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string("[1,2]"), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string("\"text\""), Tok{"<|end_message|>"}}));
}

TEST_CASE("response_format: the schema's keys are written in the order the client declared them") {
    const std::string raw = R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
        "json_schema":{"name":"r","schema":{"type":"object","properties":{"zeta":{"type":"boolean"},"alpha":{"type":"boolean"}},
        "required":["zeta","alpha"],"additionalProperties":false}}}})";
    GenerationRequest g = parse_chat_request(parse_body(raw), limits());
    keep_declared_key_order(g, raw);
    CHECK(matches(g, {std::string(R"({"zeta":true,"alpha":false})"), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string(R"({"alpha":false,"zeta":true})"), Tok{"<|end_message|>"}}));
    // Without a json_schema nothing changes.
    GenerationRequest plain = parse_chat_request(chat(json::object()), limits());
    keep_declared_key_order(plain, R"({"response_format":{"type":"json_schema","json_schema":{"schema":{}}}})");
    CHECK(plain.constraint.empty());
}

TEST_CASE("response_format with auto tools: the JSON answer (marked or not) or calls held to their schemas") {
    const GenerationRequest g = parse_chat_request(
        chat({{"tools", json::array({weather_tool()})}, {"response_format", schema_format(kCity)}}), limits());
    CHECK(g.prompt.ends_with("<|message_model|>"));  // bare: the model may call
    CHECK(matches(g, {std::string(R"({"name":"Oslo","pop":1})"), Tok{"<|end_message|>"}}));
    CHECK(matches(g, {Tok{"<|content_text|>"}, std::string(R"({"name":"Oslo","pop":1})"), Tok{"<|end_message|>"}}));
    CHECK(matches(g, {std::string("get_weather"), Tok{"<|content_invoke_tool_json|>"},
                      std::string(R"({"name":"get_weather","args":{"city":"Oslo"}})"), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string("get_weather"), Tok{"<|content_invoke_tool_json|>"},
                       std::string(R"({"name":"get_weather","args":{"town":"Oslo"}})"), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string("Sunny."), Tok{"<|end_message|>"}}));
}

TEST_CASE("response_format with a forced tool choice: the turn is the call (it has no text to shape)") {
    const GenerationRequest g = parse_chat_request(
        chat({{"tools", json::array({weather_tool()})}, {"tool_choice", "required"}, {"response_format", schema_format(kCity)}}),
        limits());
    CHECK(matches(g, {std::string("get_weather"), Tok{"<|content_invoke_tool_json|>"},
                      std::string(R"({"name":"get_weather","args":{"city":"Oslo"}})"), Tok{"<|end_message|>"}}));
    CHECK(!matches(g, {std::string(R"({"name":"Oslo","pop":1})"), Tok{"<|end_message|>"}}));
}

TEST_CASE("response_format: a wrong envelope is a 400 naming the field") {
    auto param = [](const json& rf) { return refusal(chat({{"response_format", rf}})).first; };
    CHECK(param("json") == "response_format");
    CHECK(param(json::object()) == "response_format.type");
    CHECK(param({{"type", "yaml"}}) == "response_format.type");
    CHECK(param({{"type", "json_object"}, {"schema", json::object()}}) == "response_format.schema");
    CHECK(param({{"type", "json_schema"}}) == "response_format.json_schema");
    CHECK(param({{"type", "json_schema"}, {"json_schema", "x"}}) == "response_format.json_schema");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"schema", kCity}}}}) == "response_format.json_schema.name");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"name", 3}, {"schema", kCity}}}}) == "response_format.json_schema.name");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"name", "a b"}, {"schema", kCity}}}}) == "response_format.json_schema.name");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"name", "c"}}}}) == "response_format.json_schema.schema");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"name", "c"}, {"schema", "{}"}}}}) == "response_format.json_schema.schema");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"name", "c"}, {"schema", kCity}, {"strict", "yes"}}}}) ==
          "response_format.json_schema.strict");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"name", "c"}, {"schema", kCity}, {"description", 1}}}}) ==
          "response_format.json_schema.description");
    CHECK(param({{"type", "json_schema"}, {"json_schema", {{"name", "c"}, {"schema", kCity}, {"strikt", true}}}}) ==
          "response_format.json_schema.strikt");
}

TEST_CASE("response_format: a construct the engine cannot enforce is a 400 naming it, the field and where") {
    json bad = kCity;
    bad["properties"]["pop"] = {{"oneOf", json::array({{{"type", "integer"}}, {{"type", "null"}}})}};
    const auto [param, message] = refusal(chat({{"response_format", schema_format(bad)}}));
    CHECK(param == "response_format.json_schema.schema");
    CHECK(message.find("oneOf") != std::string::npos);
    CHECK(message.find("/properties/pop") != std::string::npos);
    // strict false is enforced all the same, so refused all the same.
    json loose = schema_format(bad);
    loose["json_schema"]["strict"] = false;
    CHECK(refusal(chat({{"response_format", loose}})).first == "response_format.json_schema.schema");
    // A forced call's parameters: named by the tool that carries them.
    json tool = weather_tool();
    tool["function"]["name"] = "get_rain";
    tool["function"]["parameters"]["properties"]["city"] = {{"not", {{"type", "null"}}}};
    const auto forced = refusal(chat({{"tools", json::array({weather_tool(), tool})}, {"tool_choice", "required"}}));
    CHECK(forced.first == "tools[1].function.parameters");
    CHECK(forced.second.find("'not'") != std::string::npos);
    // Under auto without a response_format the parameters are not constrained, so not checked.
    CHECK(refusal(chat({{"tools", json::array({tool})}})).first == "accepted");
}

TEST_CASE("response_format: refused with reasoning, and on /v1/completions") {
    CHECK(refusal(chat({{"response_format", {{"type", "json_object"}}}, {"reasoning_effort", "high"}})).first ==
          "reasoning_effort");
    CHECK(refusal(chat({{"response_format", {{"type", "json_object"}}}, {"reasoning_effort", "none"}})).first == "accepted");
    CHECK(refusal(chat({{"response_format", {{"type", "text"}}}, {"reasoning_effort", "high"}})).first == "accepted");
    const json completion = {{"model", "m"}, {"prompt", "x"}, {"response_format", {{"type", "json_object"}}}};
    CHECK(refusal(completion, false).first == "response_format");
}
