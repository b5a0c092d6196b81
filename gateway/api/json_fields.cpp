#include "gateway/api/json_fields.h"

#include <cmath>

#include "gateway/api/api_error.h"
#include "protocol/fields.h"

namespace inkling::gateway {

using nlohmann::json;

nlohmann::json parse_body(std::string_view text, std::size_t max_depth, std::size_t max_values) {
    // Brackets outside strings, and separators as a bound on the values (a value follows
    // each '[', '{' and ','); the parser judges everything else afterwards.
    std::size_t depth = 0, values = 1;
    bool in_string = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                throw bad_request("the body nests JSON deeper than " + std::to_string(max_depth) +
                                  " levels (at byte " + std::to_string(i) + ")");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
        if (!in_string && (c == '[' || c == '{' || c == ',') && ++values > max_values)
            throw bad_request("the body holds more than " + std::to_string(max_values) + " JSON values (at byte " +
                              std::to_string(i) + ")");
    }
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw bad_request(std::string("the body is not valid JSON: ") + e.what());
    }
}

std::string type_name(const json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
}

const json* field(const json& body, const char* key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_in(const json& body, const char* key, double fallback, double lo, double hi, bool lo_open) {
    const json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_number()) throw bad_request(std::string("'") + key + "' must be a number, not " + type_name(*v), key);
    double x = v->get<double>();
    if (!std::isfinite(x) || x > hi || (lo_open ? x <= lo : x < lo))
        throw bad_request(std::string("'") + key + "' must lie in " + (lo_open ? "(" : "[") + protocol::format_double(lo) +
                              ", " + protocol::format_double(hi) + "]",
                          key);
    return x;
}

bool flag(const json& body, const char* key, bool fallback) {
    const json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_boolean()) throw bad_request(std::string("'") + key + "' must be a boolean, not " + type_name(*v), key);
    return v->get<bool>();
}

std::string require_model(const json& body, const std::vector<std::string>& model_ids) {
    const json* model = field(body, "model");
    if (!model) throw bad_request("'model' is required", "model");
    if (!model->is_string()) throw bad_request("'model' must be a string", "model");
    const std::string id = model->get<std::string>();
    std::string served;
    for (const auto& m : model_ids) {
        if (m == id) return id;
        served += (served.empty() ? "'" : ", '") + m + "'";
    }
    throw model_not_found("The model '" + id + "' does not exist; this server serves " + served);
}

}  // namespace inkling::gateway
