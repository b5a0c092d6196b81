// Messages API request bodies (gateway/api/anthropic/anthropic_request.cpp): the prompt is the TMLv0
// rendering /v1/chat/completions makes of the same conversation, `system` alike as a string,
// as blocks or as system messages inside `messages`; thinking maps to the effort line;
// sampling fields and stop sequences; and every refusal names what it refuses.
#include <doctest/doctest.h>

#include "gateway/api/anthropic/anthropic_request.h"
#include "gateway/api/api_error.h"
#include "gateway/api/openai/openai_request.h"
#include "gateway/generation/tool_constraint.h"
#include "protocol/tml_render.h"

using namespace inkling::gateway;
using nlohmann::json;
namespace tml = inkling::protocol::tml;

namespace {

GatewayLimits limits() {
    GatewayLimits l;
    l.model_ids = {"demo"};
    l.max_tokens_cap = 4096;
    return l;
}

json body(json messages, json extra = json::object()) {
    json b = {{"model", "demo"}, {"max_tokens", 100}, {"messages", std::move(messages)}};
    for (const auto& [k, v] : extra.items()) b[k] = v;
    return b;
}

const json kUser = json::array({{{"role", "user"}, {"content", "Hi there"}}});

GenerationRequest create(const json& b) { return parse_messages_request(b, limits()); }

// The ApiError a body is refused with (fails the check when it is accepted).
ApiError refused(const json& b, bool count = false) {
    try {
        if (count) parse_count_tokens_request(b, limits());
        else create(b);
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("accepted: " << b.dump());
    return ApiError(0, "", "");
}

bool says(const ApiError& e, const std::string& text) { return std::string(e.what()).find(text) != std::string::npos; }

std::string chat_prompt(const json& messages, json extra = json::object()) {
    json b = {{"model", "demo"}, {"messages", messages}};
    for (const auto& [k, v] : extra.items()) b[k] = v;
    return parse_chat_request(b, limits()).prompt;
}

}  // namespace

TEST_CASE("messages request: system as a string, as blocks and as a message in `messages` render one prompt, chat's") {
    const std::string top = create(body(kUser, {{"system", "Be terse."}})).prompt;
    const std::string blocks =
        create(body(kUser, {{"system", json::array({{{"type", "text"}, {"text", "Be terse."}, {"cache_control", {{"type", "ephemeral"}}}}})}}))
            .prompt;
    const std::string inside =
        create(body(json::array({{{"role", "system"}, {"content", "Be terse."}}, kUser[0]}))).prompt;
    CHECK(top == blocks);
    CHECK(top == inside);
    CHECK(top == chat_prompt(json::array({{{"role", "system"}, {"content", "Be terse."}}, kUser[0]})));
    CHECK(top.starts_with("<|message_system|><|content_text|>Be terse.<|end_message|>"));
}

TEST_CASE("messages request: a system message after the first turn applies at its place, as chat renders it") {
    const json conversation = json::array({{{"role", "user"}, {"content", "one"}},
                                           {{"role", "assistant"}, {"content", "two"}},
                                           {{"role", "system"}, {"content", [] {
                                                return json::array({{{"type", "text"}, {"text", "Now be brief."}}});
                                            }()}},
                                           {{"role", "user"}, {"content", "three"}}});
    const std::string prompt = create(body(conversation)).prompt;
    CHECK(prompt == chat_prompt(conversation));
    const auto two = prompt.find("two"), brief = prompt.find("Now be brief."), three = prompt.find("three");
    CHECK(two < brief);
    CHECK(brief < three);
}

TEST_CASE("messages request: consecutive turns of one role are one turn; a thinking block is the model's reasoning") {
    const json split = json::array({{{"role", "user"}, {"content", "a"}},
                                    {{"role", "assistant"},
                                     {"content", json::array({{{"type", "thinking"}, {"thinking", "hmm"}, {"signature", "x"}},
                                                              {{"type", "text"}, {"text", "b"}}})}},
                                    {{"role", "assistant"}, {"content", "c"}},
                                    {{"role", "user"}, {"content", "d"}}});
    const std::string prompt = create(body(split)).prompt;
    // One assistant turn: one end-of-sampling marker after its blocks.
    std::size_t ends = 0;
    for (auto at = prompt.find(tml::marker::kEndSampling); at != std::string::npos;
         at = prompt.find(tml::marker::kEndSampling, at + 1))
        ++ends;
    CHECK(ends == 1);
    CHECK(prompt.find("<|message_model|><|content_thinking|>hmm<|end_message|>") != std::string::npos);
    CHECK(prompt == chat_prompt(json::array({{{"role", "user"}, {"content", "a"}},
                                             {{"role", "assistant"}, {"reasoning_content", "hmm"},
                                              {"content", json::array({{{"type", "text"}, {"text", "b"}}, {{"type", "text"}, {"text", "c"}}})}},
                                             {{"role", "user"}, {"content", "d"}}})));
}

TEST_CASE("messages request: a final assistant turn is a prefill the model continues") {
    const GenerationRequest g = create(body(json::array({kUser[0], {{"role", "assistant"}, {"content", "The answer is"}}})));
    CHECK(g.prompt.ends_with("<|message_model|><|content_text|>The answer is"));
    CHECK(g.start_in_content);
    // An empty one is no prefill: the generation prompt as usual.
    const GenerationRequest empty = create(body(json::array({kUser[0], {{"role", "assistant"}, {"content", ""}}})));
    CHECK(empty.prompt == create(body(kUser)).prompt);
}

TEST_CASE("messages request: thinking sets the effort line; budget, adaptive, output_config.effort, display") {
    auto effort_line = [](const GenerationRequest& g) {
        const std::string key = "Thinking effort level: ";
        const auto at = g.prompt.find(key);
        REQUIRE(at != std::string::npos);
        return g.prompt.substr(at + key.size(), g.prompt.find('<', at) - at - key.size());
    };
    CHECK(effort_line(create(body(kUser))) == "0");
    CHECK(create(body(kUser)).start_in_content);
    CHECK(effort_line(create(body(kUser, {{"thinking", {{"type", "disabled"}}}}))) == "0");
    const GenerationRequest enabled =
        create(body(kUser, {{"max_tokens", 20000}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 10000}}}}));
    CHECK(effort_line(enabled) == "0.7");
    CHECK(!enabled.start_in_content);  // the model starts by thinking
    CHECK(!enabled.omit_reasoning);
    CHECK(effort_line(create(body(kUser, {{"thinking", {{"type", "adaptive"}}}}))) == "0.9");
    CHECK(effort_line(create(body(kUser, {{"thinking", {{"type", "adaptive"}}}, {"output_config", {{"effort", "max"}}}}))) ==
          "0.99");
    // Inkling's effort is its thinking effort: without thinking, output_config.effort leaves it 0.
    CHECK(effort_line(create(body(kUser, {{"output_config", {{"effort", "high"}}}}))) == "0");
    CHECK(create(body(kUser, {{"thinking", {{"type", "adaptive"}, {"display", "omitted"}}}})).omit_reasoning);
    // The budget table.
    CHECK(effort_for_budget(1024) == 0.2);
    CHECK(effort_for_budget(3999) == 0.2);
    CHECK(effort_for_budget(4000) == 0.7);
    CHECK(effort_for_budget(16000) == 0.9);
    CHECK(effort_for_budget(32000) == 0.99);
    // Refusals, as Anthropic's API.
    CHECK(says(refused(body(kUser, {{"thinking", {{"type", "enabled"}, {"budget_tokens", 1000}}}})), "thinking.budget_tokens"));
    CHECK(says(refused(body(kUser, {{"thinking", {{"type", "enabled"}, {"budget_tokens", 2000}}}})),
               "'max_tokens' must be greater than 'thinking.budget_tokens'"));
    CHECK(says(refused(body(kUser, {{"thinking", {{"type", "between_tools"}}}})), "thinking.type"));
    CHECK(says(refused(body(kUser, {{"thinking", {{"type", "adaptive"}, {"display", "full"}}}})), "thinking.display"));
    CHECK(says(refused(body(kUser, {{"output_config", {{"effort", "huge"}}}})), "output_config.effort"));
    CHECK(says(refused(body(kUser, {{"output_config", {{"format", {{"type", "json_schema"}}}}}})), "output_config.format"));
}

TEST_CASE("messages request: sampling fields, stop sequences, metadata; max_tokens required and clamped") {
    const GenerationRequest g = create(body(kUser, {{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 40},
                                                    {"stop_sequences", {"END", "\n\n"}}, {"stream", true},
                                                    {"metadata", {{"user_id", "u-1"}}}}));
    CHECK(g.temperature == 0.5);
    CHECK(g.top_p == 0.9);
    CHECK(g.top_k == 40);
    CHECK(g.stop == std::vector<std::string>{"END", "\n\n"});
    CHECK(g.stream);
    CHECK(g.user == "u-1");
    CHECK(g.max_tokens == 100);
    CHECK(!g.count_only);
    CHECK(create(body(kUser, {{"max_tokens", 64000}})).max_tokens == 4096);
    json no_max = body(kUser);
    no_max.erase("max_tokens");
    CHECK(says(refused(no_max), "'max_tokens' is required"));
    CHECK(says(refused(body(kUser, {{"max_tokens", 0}})), "max_tokens"));
    CHECK(says(refused(body(kUser, {{"temperature", 1.5}})), "'temperature' must lie in [0, 1]"));
    CHECK(says(refused(body(kUser, {{"top_p", 0}})), "top_p"));
    CHECK(says(refused(body(kUser, {{"top_k", 0}})), "top_k"));
    CHECK(says(refused(body(kUser, {{"stop_sequences", "END"}})), "stop_sequences"));
    CHECK(says(refused(body(kUser, {{"stop_sequences", {""}}})), "stop_sequences"));
    // Accepted with no effect (docs/gateway.md): caching hints, Claude Code's extras.
    CHECK_NOTHROW(create(body(kUser, {{"cache_control", {{"type", "ephemeral"}}}, {"context_management", json::object()},
                                      {"service_tier", "auto"}, {"inference_geo", "us"}, {"speed", "fast"},
                                      {"container", nullptr}, {"diagnostics", json::object()}})));
}

TEST_CASE("messages request: tools and a tool_use/tool_result history render as chat renders tool calls and results") {
    const json tools = json::array({{{"name", "get_weather"}, {"description", "Weather by city"},
                                     {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}},
                                     {"cache_control", {{"type", "ephemeral"}}}}});
    const json history = json::array(
        {{{"role", "user"}, {"content", "Weather in Oslo?"}},
         {{"role", "assistant"}, {"content", json::array({{{"type", "text"}, {"text", "Checking."}},
                                                          {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"},
                                                           {"input", {{"city", "Oslo"}}}}})}},
         {{"role", "user"}, {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "3C, rain"}},
                                                     {{"type", "text"}, {"text", "And tomorrow?"}}})}}});
    const GenerationRequest g = create(body(history, {{"tools", tools}, {"tool_choice", {{"type", "auto"}}}}));
    CHECK(g.tools.callable());
    CHECK(g.tools.parallel);
    CHECK(g.start_in_content);  // effort 0: unmarked text is the answer, tools or not (as chat)
    const json openai_tools = json::array({{{"type", "function"},
                                            {"function", {{"name", "get_weather"}, {"description", "Weather by city"},
                                                          {"parameters", tools[0]["input_schema"]}}}}});
    const json chat = json::array(
        {{{"role", "user"}, {"content", "Weather in Oslo?"}},
         {{"role", "assistant"}, {"content", "Checking."},
          {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"},
                                       {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Oslo\"}"}}}}})}},
         {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "3C, rain"}},
         {{"role", "user"}, {"content", "And tomorrow?"}}});
    CHECK(g.prompt == chat_prompt(chat, {{"tools", openai_tools}}));
    CHECK(g.prompt.find("<|message_tool|>get_weather<|content_text|>3C, rain<|end_message|>") != std::string::npos);
    // tool_choice none: no declaration; disable_parallel_tool_use: one call a turn.
    CHECK(!create(body(history, {{"tools", tools}, {"tool_choice", {{"type", "none"}}}})).tools.callable());
    CHECK(!create(body(history, {{"tools", tools}, {"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", true}}}}))
               .tools.parallel);
    CHECK(create(body(history, {{"tools", tools}})).constraint.empty());  // auto: the model is free
    // any / tool: constrained decoding forces the call (tool_constraint.h), never auto.
    const GenerationRequest any = create(body(kUser, {{"tools", tools}, {"tool_choice", {{"type", "any"}}}}));
    CHECK(any.tools.choice == ToolChoice::Required);
    CHECK(any.constraint == forced_call_constraint(any.tools));
    CHECK(!any.constraint.empty());
    const GenerationRequest named =
        create(body(kUser, {{"tools", tools}, {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}}));
    CHECK(named.tools.choice == ToolChoice::Named);
    CHECK(named.tools.name == "get_weather");
    CHECK(named.constraint == forced_call_constraint(named.tools));
    // Counting generates nothing: no constraint for the engine to compile.
    CHECK(parse_count_tokens_request({{"model", "demo"}, {"messages", kUser}, {"tools", tools}, {"tool_choice", {{"type", "any"}}}},
                                     limits())
              .constraint.empty());
    // As at Anthropic: a forced call starts the turn, so no thinking before it and no prefill.
    CHECK(says(refused(body(kUser, {{"tools", tools}, {"tool_choice", {{"type", "any"}}}, {"thinking", {{"type", "adaptive"}}}})),
               "cannot be combined with thinking"));
    CHECK(says(refused(body(json::array({kUser[0], {{"role", "assistant"}, {"content", "Sure"}}}),
                            {{"tools", tools}, {"tool_choice", {{"type", "any"}}}})),
               "a prefill"));
    CHECK(says(refused(body(kUser, {{"tools", tools}, {"tool_choice", {{"type", "tool"}, {"name", "other"}}}})),
               "not among 'tools'"));
    CHECK(says(refused(body(kUser, {{"tools", json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}})}})),
               "tools[0]: tool type 'web_search_20250305'"));
    CHECK(says(refused(body(kUser, {{"tools", json::array({{{"name", "f"}}})}})), "tools[0].input_schema"));
    CHECK(says(refused(body(json::array({{{"role", "user"}, {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "nope"}}})}}}))),
               "tool_use_id 'nope' names no tool_use block"));
}

TEST_CASE("messages request: images, documents and unknown fields are refused, naming them") {
    const json image = {{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "AAAA"}}}};
    const ApiError e = refused(body(json::array(
        {{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "look"}}, image})}}})));
    CHECK(e.status == 400);
    CHECK(says(e, "messages[0].content[1]"));
    CHECK(says(e, "image blocks are not supported"));
    CHECK(e.param == "messages[0].content[1].type");
    CHECK(says(refused(body(json::array({{{"role", "user"}, {"content", json::array({{{"type", "document"}}})}}}))),
               "document blocks"));
    CHECK_NOTHROW(create(body(kUser, {{"tools", json::array()}, {"tool_choice", {{"type", "auto"}}}})));
    CHECK(says(refused(body(kUser, {{"tool_choice", {{"type", "any"}}}})), "tool_choice"));
    CHECK(says(refused(body(json::array({{{"role", "user"}, {"content", json::array({{{"type", "tool_use"}, {"id", "t1"},
                                                                                     {"name", "f"}, {"input", json::object()}}})}}}))),
               "messages[0].content[0]: tool_use blocks belong to assistant messages"));
    CHECK(says(refused(body(json::array({{{"role", "user"}, {"content", json::array({{{"type", "thinking"}, {"thinking", "x"}}})}}}))),
               "thinking blocks belong to assistant messages"));
    CHECK(says(refused(body(kUser, {{"mcp_servers", json::array()}})), "'mcp_servers' is not a field"));
    CHECK(says(refused(body(json::array({{{"role", "tool"}, {"content", "x"}}}))), "messages[0].role"));
    CHECK(says(refused(body(json::array({{{"role", "user"}, {"content", ""}}, {{"role", "user"}, {"content", "x"}}}))),
               "messages[0].content is empty"));
    CHECK(says(refused(body(json::array())), "'messages'"));
    const ApiError model = refused(json{{"model", "claude"}, {"max_tokens", 5}, {"messages", kUser}});
    CHECK(model.status == 404);
}

TEST_CASE("count_tokens request: the prompt a create renders, nothing generated; create-only fields refused") {
    json counted = {{"model", "demo"}, {"messages", kUser}, {"system", "S"}, {"thinking", {{"type", "adaptive"}}}};
    const GenerationRequest c = parse_count_tokens_request(counted, limits());
    CHECK(c.count_only);
    CHECK(!c.stream);
    CHECK(c.prompt == create(body(kUser, {{"system", "S"}, {"thinking", {{"type", "adaptive"}}}})).prompt);
    CHECK(c.affinity == create(body(kUser, {{"system", "S"}, {"thinking", {{"type", "adaptive"}}}})).affinity);
    counted["max_tokens"] = 5;
    CHECK(says(refused(counted, true), "'max_tokens' is not a count_tokens field"));
}
