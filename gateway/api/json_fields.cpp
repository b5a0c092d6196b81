#include "gateway/api/json_fields.h"

#include <cmath>

#include "gateway/api/api_error.h"
#include "protocol/fields.h"

namespace inkling::gateway {

using nlohmann::json;

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
    throw ApiError(404, "invalid_request_error", "The model '" + id + "' does not exist; this server serves " + served,
                   "model", "model_not_found");
}

}  // namespace inkling::gateway
