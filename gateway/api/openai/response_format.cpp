#include "gateway/api/openai/response_format.h"

#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"
#include "gateway/api/openai/openai_tools.h"

namespace inkling::gateway {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

void only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& at) {
    for (const auto& [k, _] : obj.items()) {
        bool known = false;
        std::string list;
        for (const char* key : keys) {
            known = known || k == key;
            list += (list.empty() ? "" : ", ") + std::string(key);
        }
        if (!known) throw bad_request(at + "." + k + " is not a field of " + at + " (" + list + ")", at + "." + k);
    }
}

}  // namespace

ResponseFormat parse_response_format(const json& body) {
    ResponseFormat f;
    const json* rf = field(body, "response_format");
    if (!rf) return f;
    if (!rf->is_object()) throw bad_request("'response_format' must be an object, not " + type_name(*rf), "response_format");
    const json* type = field(*rf, "type");
    if (!type || !type->is_string())
        throw bad_request("response_format.type must be a string: text, json_object or json_schema", "response_format.type");
    const std::string t = type->get<std::string>();
    if (t == "text" || t == "json_object") {
        only_keys(*rf, {"type"}, "response_format");
        f.kind = t == "text" ? ResponseFormat::Kind::Text : ResponseFormat::Kind::JsonObject;
        return f;
    }
    if (t != "json_schema")
        throw bad_request("response_format.type '" + t + "' is not one of text, json_object, json_schema",
                          "response_format.type");
    only_keys(*rf, {"type", "json_schema"}, "response_format");
    const json* js = field(*rf, "json_schema");
    if (!js || !js->is_object())
        throw bad_request("response_format.json_schema must be an object {name, description?, schema, strict?}",
                          "response_format.json_schema");
    const std::string p = "response_format.json_schema";
    only_keys(*js, {"name", "description", "schema", "strict"}, p);
    const json* name = field(*js, "name");
    if (!name || !name->is_string()) throw bad_request(p + ".name must be a string", p + ".name");
    f.name = name->get<std::string>();
    if (!valid_function_name(f.name)) throw bad_request(p + ".name must be 1-64 characters of a-z, A-Z, 0-9, _ and -", p + ".name");
    if (const json* d = field(*js, "description"); d && !d->is_string())
        throw bad_request(p + ".description must be a string", p + ".description");
    const json* schema = field(*js, "schema");
    if (!schema || !schema->is_object())
        throw bad_request(p + ".schema must be a JSON Schema object" + (schema ? ", not " + type_name(*schema) : ""),
                          p + ".schema");
    f.schema = ordered_json(*schema);  // sorted here; declared_schema gives the client's order
    if (const json* s = field(*js, "strict")) {
        if (!s->is_boolean()) throw bad_request(p + ".strict must be a boolean", p + ".strict");
        f.strict = s->get<bool>();
    }
    f.kind = ResponseFormat::Kind::JsonSchema;
    return f;
}

std::optional<ordered_json> declared_schema(std::string_view raw_body) {
    const ordered_json body = ordered_json::parse(raw_body, nullptr, false);
    if (!body.is_object()) return std::nullopt;
    const auto rf = body.find("response_format");
    if (rf == body.end() || !rf->is_object()) return std::nullopt;
    const auto js = rf->find("json_schema");
    if (js == rf->end() || !js->is_object()) return std::nullopt;
    const auto schema = js->find("schema");
    if (schema == js->end() || !schema->is_object()) return std::nullopt;
    return *schema;
}

ordered_json answer_value_node(const ResponseFormat& format) {
    if (format.kind == ResponseFormat::Kind::JsonObject) return {{"type", "json_object"}, {"whitespace", "flexible"}};
    return {{"type", "json_schema"}, {"schema", format.schema}, {"whitespace", "flexible"}, {"key_order", "declared"}};
}

}  // namespace inkling::gateway
