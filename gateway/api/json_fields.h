// Reading a request body and its fields, shared by the dialects' parsers
// (api/openai/openai_request.cpp, api/anthropic/anthropic_request.cpp): the body within
// bounds (parse_body), then each field, where a JSON null counts as absent and a field of
// the wrong type or out of range is an ApiError 400 naming it.
//
//   json body = parse_body(raw);                                       // 400 unless JSON within bounds
//   if (const json* v = field(body, "seed")) …;                       // absent or null: nullptr
//   double t = number_in(body, "temperature", 1.0, 0.0, 2.0, false);  // [0, 2], default 1
//   bool s = flag(body, "stream", false);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace inkling::gateway {

// JSON nests at most this deep (arrays and objects): 32 MiB of '[' would otherwise cost
// gigabytes of parser state and DOM.
inline constexpr std::size_t kMaxJsonDepth = 64;
// and holds at most this many values: each costs up to ~100 bytes of DOM, so 32 MiB of
// "{}," (11 million objects) took 1 GiB; at this cap the DOM stays under ~30 MB.
inline constexpr std::size_t kMaxJsonValues = 262144;

// A request body → JSON. Throws ApiError 400 for a body nested deeper than `max_depth` or
// holding more than `max_values` values (both counted by one scan before the parser runs),
// or one that is not JSON.
nlohmann::json parse_body(std::string_view text, std::size_t max_depth = kMaxJsonDepth,
                          std::size_t max_values = kMaxJsonValues);

// "null", "a boolean", "a number", "a string", "an array", "an object": for error messages.
std::string type_name(const nlohmann::json& v);
// The field, or nullptr when it is absent or null.
const nlohmann::json* field(const nlohmann::json& body, const char* key);
// A number in [lo, hi] ((lo, hi] when lo_open), else `fallback` when absent.
double number_in(const nlohmann::json& body, const char* key, double fallback, double lo, double hi, bool lo_open);
// A boolean, else `fallback` when absent.
bool flag(const nlohmann::json& body, const char* key, bool fallback);
// `model` is present, a string, and one of the models this server serves (else 404
// model_not_found); returns it.
std::string require_model(const nlohmann::json& body, const std::vector<std::string>& model_ids);

}  // namespace inkling::gateway
