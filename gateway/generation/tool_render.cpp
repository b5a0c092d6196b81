#include "gateway/generation/tool_render.h"

namespace inkling::gateway {

using nlohmann::json;

// nlohmann's objects are std::maps: dump() writes their keys sorted by bytes, which for
// UTF-8 is code-point order, as Python's sort_keys; compact dump() separates with `,` `:`.
std::string canonical_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string tool_declarations(const std::vector<ToolSpec>& tools) {
    json all = json::array();
    for (const auto& t : tools)
        all.push_back({{"description", t.description}, {"name", t.name}, {"parameters", t.parameters}, {"type", "function"}});
    return canonical_json(all);
}

std::string tool_call_envelope(const std::string& name, const json& args) {
    return "{\"name\":" + canonical_json(json(name)) + ",\"args\":" + canonical_json(args) + "}";
}

}  // namespace inkling::gateway
