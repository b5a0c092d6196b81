// Tools in TMLv0's canonical JSON (docs/model.md, "Tools"), for the
// renderer (protocol/tml_render.h), which takes them as text: the declaration array and a
// call's envelope. Any API dialect's tools map onto these (OpenAI `function`, Anthropic
// `input_schema`).
//
//   RenderOptions o;  o.tools = tool_declarations({{"get_weather", "Weather now", schema}});
//   Part::tool_call("get_weather", tool_call_envelope("get_weather", {{"city", "Oslo"}}));
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace inkling::gateway {

struct ToolSpec {
    std::string name;
    std::string description;                             // "" when the caller gave none
    nlohmann::json parameters = nlohmann::json::object();  // the JSON Schema; {} when none
};

// The canonical JSON of a JSON value: keys sorted at every depth, no spaces, non-ASCII as is
// (what the chat template's `tojson` writes).
std::string canonical_json(const nlohmann::json& value);
// [{"description":…,"name":…,"parameters":…,"type":"function"},…]: each spec rebuilt with
// exactly these four keys.
std::string tool_declarations(const std::vector<ToolSpec>& tools);
// {"name":<name>,"args":<canonical args>}: name first, as the model was trained.
std::string tool_call_envelope(const std::string& name, const nlohmann::json& args);

}  // namespace inkling::gateway
