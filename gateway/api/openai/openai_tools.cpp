#include "gateway/api/openai/openai_tools.h"

#include <set>

#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"

namespace inkling::gateway {

using nlohmann::json;
namespace tml = protocol::tml;

namespace {

const std::string& string_at(const json& obj, const char* key, const std::string& path) {
    const json* v = obj.is_object() ? field(obj, key) : nullptr;
    if (!v || !v->is_string()) throw bad_request(path + "." + key + " must be a string", path + "." + key);
    return v->get_ref<const std::string&>();
}

ToolSpec parse_tool(const json& t, const std::string& p) {
    if (!t.is_object()) throw bad_request(p + " must be an object", p);
    const json* type = field(t, "type");
    if (!type || !type->is_string()) throw bad_request(p + ".type must be \"function\"", p + ".type");
    if (type->get<std::string>() != "function")
        throw bad_request(p + ".type '" + type->get<std::string>() + "' is not supported (only function tools)", p + ".type");
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object()) throw bad_request(p + ".function must be an object", p + ".function");
    const std::string fp = p + ".function";
    ToolSpec spec;
    spec.name = string_at(*fn, "name", fp);
    if (!valid_function_name(spec.name))
        throw bad_request(fp + ".name must be 1-64 characters of a-z, A-Z, 0-9, _ and -", fp + ".name");
    if (const json* d = field(*fn, "description")) {
        if (!d->is_string()) throw bad_request(fp + ".description must be a string", fp + ".description");
        spec.description = d->get<std::string>();
    }
    if (const json* params = field(*fn, "parameters")) {
        if (!params->is_object()) throw bad_request(fp + ".parameters must be a JSON Schema object", fp + ".parameters");
        spec.parameters = *params;
    }
    if (const json* strict = field(*fn, "strict"); strict && !strict->is_boolean())
        throw bad_request(fp + ".strict must be a boolean", fp + ".strict");
    return spec;
}

}  // namespace

bool valid_function_name(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (char c : n)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    return true;
}

ToolUse parse_openai_tools(const json& body) {
    for (const char* old : {"functions", "function_call"})
        if (field(body, old))
            throw bad_request(std::string("'") + old + "' (deprecated) is not supported; use 'tools' and 'tool_choice'", old);
    ToolUse use;
    if (const json* tools = field(body, "tools")) {
        if (!tools->is_array()) throw bad_request("'tools' must be an array", "tools");
        std::set<std::string> seen;
        for (std::size_t i = 0; i < tools->size(); ++i) {
            const std::string p = "tools[" + std::to_string(i) + "]";
            ToolSpec spec = parse_tool((*tools)[i], p);
            if (!seen.insert(spec.name).second)
                throw bad_request(p + ": a second function named '" + spec.name + "'", p + ".function.name");
            use.tools.push_back(std::move(spec));
        }
    }
    use.choice = use.tools.empty() ? ToolChoice::None : ToolChoice::Auto;  // OpenAI's defaults
    if (const json* choice = field(body, "tool_choice")) {
        if (choice->is_string()) {
            const std::string c = choice->get<std::string>();
            if (c == "none") use.choice = ToolChoice::None;
            else if (c == "auto") use.choice = ToolChoice::Auto;
            else if (c == "required") use.choice = ToolChoice::Required;
            else throw bad_request("'tool_choice' must be none, auto, required or {\"type\":\"function\",…}", "tool_choice");
        } else if (choice->is_object()) {
            const json* type = field(*choice, "type");
            if (!type || !type->is_string() || type->get<std::string>() != "function")
                throw bad_request("'tool_choice.type' must be \"function\" (other forms are not supported)", "tool_choice.type");
            const json* fn = field(*choice, "function");
            if (!fn || !fn->is_object()) throw bad_request("'tool_choice.function' must be an object", "tool_choice.function");
            use.name = string_at(*fn, "name", "tool_choice.function");
            use.choice = ToolChoice::Named;
        } else {
            throw bad_request("'tool_choice' must be a string or an object", "tool_choice");
        }
        if (use.choice != ToolChoice::None && use.tools.empty())
            throw bad_request("'tool_choice' other than none needs 'tools'", "tool_choice");
        if (use.choice == ToolChoice::Named) {
            bool declared = false;
            for (const auto& t : use.tools) declared = declared || t.name == use.name;
            if (!declared)
                throw bad_request("'tool_choice' names '" + use.name + "', which is not among 'tools'", "tool_choice.function.name");
        }
    }
    use.parallel = flag(body, "parallel_tool_calls", true);
    return use;
}

void append_openai_tool_calls(const json& message, const std::string& path, tml::Message& out,
                              std::map<std::string, std::string>& names) {
    const json* calls = field(message, "tool_calls");
    if (!calls) return;
    const std::string p = path + ".tool_calls";
    if (!calls->is_array()) throw bad_request(p + " must be an array", p);
    if (out.role != tml::Role::Assistant) throw bad_request(p + ": only assistant messages carry tool calls", p);
    for (std::size_t k = 0; k < calls->size(); ++k) {
        const json& c = (*calls)[k];
        const std::string cp = p + "[" + std::to_string(k) + "]";
        if (!c.is_object()) throw bad_request(cp + " must be an object", cp);
        if (const json* type = field(c, "type"); type && (!type->is_string() || type->get<std::string>() != "function"))
            throw bad_request(cp + ".type must be \"function\"", cp + ".type");
        const json* fn = field(c, "function");
        if (!fn || !fn->is_object()) throw bad_request(cp + ".function must be an object", cp + ".function");
        const std::string& name = string_at(*fn, "name", cp + ".function");
        if (name.empty()) throw bad_request(cp + ".function.name is empty", cp + ".function.name");
        // Arguments come as a JSON string (OpenAI); the envelope carries them canonical.
        json args = json::object();
        if (const json* a = field(*fn, "arguments")) {
            if (a->is_string()) {
                args = json::parse(a->get_ref<const std::string&>(), nullptr, false);
                if (args.is_discarded())
                    throw bad_request(cp + ".function.arguments is not valid JSON", cp + ".function.arguments");
            } else if (a->is_object()) {
                args = *a;
            } else {
                throw bad_request(cp + ".function.arguments must be a JSON string", cp + ".function.arguments");
            }
        }
        if (const json* id = field(c, "id")) {
            if (!id->is_string()) throw bad_request(cp + ".id must be a string", cp + ".id");
            names[id->get<std::string>()] = name;
        }
        out.parts.push_back(tml::Part::tool_call(name, tool_call_envelope(name, args)));
    }
}

std::string openai_tool_result_name(const json& message, const std::string& path,
                                    const std::map<std::string, std::string>& names) {
    if (const json* name = field(message, "name"); name && name->is_string()) return name->get<std::string>();
    if (const json* id = field(message, "tool_call_id")) {
        if (!id->is_string()) throw bad_request(path + ".tool_call_id must be a string", path + ".tool_call_id");
        if (auto it = names.find(id->get<std::string>()); it != names.end()) return it->second;
    }
    return {};
}

}  // namespace inkling::gateway
