// The constraint a SUBMIT carries (PROTOCOL.md §12.3): a JSON tree of nodes compiled
// into one Grammar.
//
//   {"type":"json_schema","schema":{…},"whitespace":"flexible"|"none","key_order":"declared"|"sorted"}
//   {"type":"json_object","whitespace":…}           any JSON object
//   {"type":"text","text":"get_weather"}            these bytes exactly
//   {"type":"token","token":"<|end_message|>"}      one special (added) token, by its text
//   {"type":"sequence","items":[…]}                 each in turn
//   {"type":"any_of","items":[…]}                   one of them
//   {"type":"repeat","item":…,"min":1,"max":4,"separator":…}   max absent: unbounded
//
// The output is exactly one match of the root node, then EOS (which no node names: the
// end is implicit). A forced Inkling tool call is a sequence of the name as text, the
// <|content_invoke_tool_json|> token, the envelope's text around a json_schema node for
// the arguments, and <|end_message|> (docs/engine.md has the example).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace inkling::grammar {

// `special_id` maps an added token's text to its id, or -1. Throws Error naming the node
// (a JSON pointer into the payload) and what is wrong with it.
std::shared_ptr<const Grammar> compile_constraint(std::string_view payload,
                                                  const std::function<std::int32_t(const std::string&)>& special_id,
                                                  std::int32_t eos);

}  // namespace inkling::grammar
