// OpenAI chat's tool fields (its function-calling guide) → ToolUse and TMLv0 parts:
// `tools`, `tool_choice`, `parallel_tool_calls`, and the history's assistant `tool_calls`
// and tool results. Every problem is a 400 naming the field; the deprecated `functions` and
// `function_call` are refused rather than ignored.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "gateway/generation/tool_use.h"
#include "protocol/tml_render.h"

namespace inkling::gateway {

ToolUse parse_openai_tools(const nlohmann::json& body);

// OpenAI's rule for function names (and response_format.json_schema.name): 1-64 of a-z A-Z
// 0-9 _ -.
bool valid_function_name(const std::string& name);

// An assistant message's `tool_calls` ("messages[i]" is `path`) appended to `message` as
// calls, each recorded in `names` (tool_call_id → function) for the results that follow.
void append_openai_tool_calls(const nlohmann::json& message, const std::string& path, protocol::tml::Message& out,
                              std::map<std::string, std::string>& names);

// A tool result's author (docs/model.md, "Tools"): its `name`, else the function its
// `tool_call_id` called, else "".
std::string openai_tool_result_name(const nlohmann::json& message, const std::string& path,
                                    const std::map<std::string, std::string>& names);

}  // namespace inkling::gateway
