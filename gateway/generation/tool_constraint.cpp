#include "gateway/generation/tool_constraint.h"

#include <nlohmann/json.hpp>

namespace inkling::gateway {

using nlohmann::json;

namespace {

json text(const std::string& t) { return {{"type", "text"}, {"text", t}}; }
json token(const char* t) { return {{"type", "token"}, {"token", t}}; }

json call(const ToolSpec& t) {
    // A function without parameters takes none: its arguments are {}.
    const json schema = t.parameters.empty() ? json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}
                                             : t.parameters;
    return {{"type", "sequence"},
            {"items", json::array({text(t.name), token("<|content_invoke_tool_json|>"),
                                   text("{\"name\":" + json(t.name).dump() + ",\"args\":"),
                                   {{"type", "json_schema"}, {"schema", schema}, {"whitespace", "none"}, {"key_order", "sorted"}},
                                   text("}"), token("<|end_message|>")})}};
}

}  // namespace

json any_calls_node(const ToolUse& use) {
    json any = json::array();
    for (const auto& t : use.tools) any.push_back(call(t));
    json item = any.size() == 1 ? any[0] : json{{"type", "any_of"}, {"items", any}};
    json calls = {{"type", "repeat"}, {"item", item}, {"min", 1}, {"separator", token("<|message_model|>")}};
    if (!use.parallel) calls["max"] = 1;
    return calls;
}

std::string forced_call_constraint(const ToolUse& use) {
    if (use.choice == ToolChoice::Named) {
        for (const auto& t : use.tools)
            if (t.name == use.name) return call(t).dump();
        return {};
    }
    if (use.choice != ToolChoice::Required || use.tools.empty()) return {};
    return any_calls_node(use).dump();
}

}  // namespace inkling::gateway
