// What a request asks of tools, in no API dialect's words: the declared functions, which of
// them the model may or must call, and at most how many in one turn. Filled by the
// dialects' parsers (gateway/api/openai/openai_tools.h, the Messages API's), read by the
// renderer (the declaration block), the output parser (calls only when declared) and the
// generation driver.
#pragma once

#include <string>
#include <vector>

#include "gateway/generation/tool_render.h"

namespace inkling::gateway {

enum class ToolChoice {
    None,      // no declaration rendered; the model cannot call
    Auto,      // declared; the model calls or answers as it likes
    Required,  // one call or more, of any declared function (needs constrained decoding)
    Named,     // exactly `ToolUse::name` (needs constrained decoding)
};

struct ToolUse {
    std::vector<ToolSpec> tools;
    ToolChoice choice = ToolChoice::None;
    std::string name;       // Named: the function
    bool parallel = true;   // false: the turn ends after its first call
    // The model may call: tools were declared and the choice is not None.
    bool callable() const { return choice != ToolChoice::None && !tools.empty(); }
};

}  // namespace inkling::gateway
