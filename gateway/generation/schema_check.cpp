#include "gateway/generation/schema_check.h"

#include <vector>

#include "gateway/api/api_error.h"
#include "grammar/error.h"
#include "grammar/json_schema.h"

namespace inkling::gateway {

void check_schema(const nlohmann::ordered_json& schema, const std::string& param, bool sorted_keys) {
    namespace g = inkling::grammar;
    try {
        g::Nfa nfa;
        std::vector<g::Frag> rules(1);
        g::SchemaCompiler c(nfa, rules, schema,
                            {g::Whitespace::Flexible, sorted_keys ? g::KeyOrder::Sorted : g::KeyOrder::Declared});
        rules[0] = c.compile();
        c.finish();
    } catch (const g::Error& e) {
        throw bad_request(param + ": " + e.what() + " (constrained decoding enforces a JSON Schema subset: docs/engine.md)",
                          param);
    }
}

}  // namespace inkling::gateway
