// Reading fields of a request body, shared by the dialects' parsers (openai_request.cpp,
// anthropic_request.cpp): a JSON null counts as absent, and a field of the wrong type or
// out of range is an ApiError 400 naming it.
//
//   if (const json* v = field(body, "seed")) …;                       // absent or null: nullptr
//   double t = number_in(body, "temperature", 1.0, 0.0, 2.0, false);  // [0, 2], default 1
//   bool s = flag(body, "stream", false);
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace inkling::gateway {

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
