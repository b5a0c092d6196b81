// OpenAI's `response_format` on /v1/chat/completions (its Structured Outputs guide), held
// by the engine's constrained decoding (PROTOCOL.md §12.3), never left to the model:
//
//   {"type":"text"}                                    no constraint (also when absent or null)
//   {"type":"json_object"}                             the answer is one JSON object, any
//   {"type":"json_schema","json_schema":{"name":"x","description"?,"schema":{…},"strict"?}}
//                                                      the answer is JSON valid against the schema
//
// The envelope is checked here (a wrong or missing field is a 400 naming it), the schema by
// gateway/generation/schema_check.h; openai_request.cpp puts the answer's grammar together with the
// request's tools (chat_constraint). A schema's keys are written in the order the client
// declared them, as OpenAI does: the body's parser sorts keys, so the schema is read again
// from the raw body in declared order (declared_schema).
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/generation/generation_request.h"

namespace inkling::gateway {

// The body's `response_format` (absent or null: Text). Throws ApiError 400 naming the field
// for a wrong envelope: not an object, an unknown type or key, json_schema without a valid
// `name` (1-64 of a-z A-Z 0-9 _ -) or an object `schema`, a `strict` not a boolean.
ResponseFormat parse_response_format(const nlohmann::json& body);

// response_format.json_schema.schema read from the raw body with its keys in document
// order; nullopt when the body holds none (or is not JSON: parse_body judged it already).
std::optional<nlohmann::ordered_json> declared_schema(std::string_view raw_body);

// The grammar node of the answer's value: {"type":"json_schema","schema":…} or
// {"type":"json_object"}, whitespace as the model likes it (flexible), keys as declared.
nlohmann::ordered_json answer_value_node(const ResponseFormat& format);

}  // namespace inkling::gateway
