// A forced tool choice as the engine's constraint (PROTOCOL.md §12.3, SUBMIT grammar=N): the
// output can only be calls in Inkling's format (docs/model.md, "Tools")
// whose arguments match the function's JSON Schema, compact and with sorted keys as the model
// was trained, each call
//
//   NAME <|content_invoke_tool_json|> {"name":"NAME","args":<schema>} <|end_message|>
//
// after the bare <|message_model|> the prompt ends with. Named: that one call. Required: one
// call or more of any declared function (one when parallel calls are off), joined by
// <|message_model|>. The engine's compiler refuses a schema construct it cannot take, naming it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gateway/generation/tool_use.h"

namespace inkling::gateway {

// The constraint's JSON text for ToolChoice::Required or Named; "" for None and Auto.
std::string forced_call_constraint(const ToolUse& tools);

// The node of one call or more of any declared function (one when parallel calls are off):
// `required`'s constraint, and the calls branch when `auto` meets a response_format.
nlohmann::json any_calls_node(const ToolUse& tools);

}  // namespace inkling::gateway
