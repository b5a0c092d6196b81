// A JSON Schema checked against what the engine's constrained decoding can enforce, in the
// gateway, before the request takes a slot: the engine's own compiler front half
// (grammar/json_schema.h, schema → automaton, no tokenizer or model needed) runs on
// it, so a construct it cannot take (`not`, `oneOf`, number bounds, …) is a 400 naming the
// construct, where it is in the schema, and the request field that carried it — the same
// refusal the engine would answer, minus a trip to it and a slot's wait.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace inkling::gateway {

// Throws ApiError 400 invalid_request_error, param `param`, message "<param>: schema at
// <pointer>: <why>", for a schema grammar/ refuses (or one too large to compile).
// `sorted_keys`: the keys as a forced tool call writes them (sorted), else as declared.
void check_schema(const nlohmann::ordered_json& schema, const std::string& param, bool sorted_keys);

}  // namespace inkling::gateway
