// JSON Schema → grammar: the subset OpenAI documents for strict structured outputs (its
// Structured Outputs guide, "Supported schemas"; docs/engine.md lists ours), enforced
// exactly, and an error naming anything else.
//
//   Nfa n;  std::vector<Frag> rules(1);
//   SchemaCompiler c(n, rules, schema, {Whitespace::Flexible, KeyOrder::Declared});
//   rules[0] = c.compile();                            // the root value
//   c.finish();                                        // the rules recursion asked for
//   Grammar g = Grammar::compile(n, rules);
//
// Taken: type (one or a list), properties, required, additionalProperties (false, or a
// schema for a map with no properties), enum, const, items, minItems/maxItems (≤ 256),
// anyOf, minimum/maximum/exclusiveMinimum/exclusiveMaximum on integers (integer_range.h),
// allOf of one schema, $ref to "#", "#/$defs/…" or "#/definitions/…" (recursion
// included), string format (string_formats.h), pattern (pattern.h), minLength/maxLength
// (≤ 256), and the
// annotations (title, description, default, examples, $comment, $schema, $id, deprecated,
// readOnly, writeOnly). `{}` and `true` are any JSON value.
// Output keys come in the schema's order (KeyOrder::Sorted: sorted, as Inkling's tool
// arguments are); a property not in `required` may be left out; with additionalProperties
// absent or true, only the declared properties are written (a subset of what the schema
// allows, so output always validates), and an object with no properties is any object.
// Refused (Error "schema at <pointer>: …"): every other keyword (bounds on a number,
// multipleOf, oneOf, not, if/then/else, patternProperties, prefixItems, …),
// `false`, unknown types and formats, bounds past the limits, and refs that point
// outside the document.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_lexemes.h"
#include "grammar/nfa.h"

namespace inkling::grammar {

// Schemas are read with their keys in document order: that order is the output's.
using Json = nlohmann::ordered_json;

enum class KeyOrder { Declared, Sorted };

struct JsonOptions {
    Whitespace whitespace = Whitespace::Flexible;
    KeyOrder key_order = KeyOrder::Declared;
};

class SchemaCompiler {
public:
    static constexpr std::int64_t kMaxItemsBound = 256, kMaxLengthBound = 256;
    static constexpr int kMaxNesting = 64;

    // `rules` is the grammar's rule list (rule 0 the root, filled by the caller); rules
    // made for recursive $refs are appended to it.
    SchemaCompiler(Nfa& nfa, std::vector<Frag>& rules, const Json& root, JsonOptions options);
    Frag compile();                 // a value of the root schema
    Frag any_object();              // json_object: any JSON object
    // Compiles the rules compile() and any_object() asked for; call once, last.
    void finish();

private:
    Frag value(const Json& s, const std::string& at, int depth);
    Frag typed(const std::string& type, const Json& s, const std::string& at, int depth);
    Frag object(const Json& s, const std::string& at, int depth);
    Frag array(const Json& s, const std::string& at, int depth);
    Frag string(const Json& s, const std::string& at);
    Frag integer(const Json& s, const std::string& at);
    Frag literals(const std::vector<Json>& values);
    Frag ref(const std::string& target, const std::string& at, int depth);
    Frag any_value_call();
    Frag map_of(const std::function<Frag()>& value);
    const Json& resolve(const std::string& target, const std::string& at) const;

    Nfa& n_;
    std::vector<Frag>& rules_;
    const Json& root_;
    JsonOptions opt_;
    std::vector<std::string> expanding_;          // $refs being inlined now
    std::map<std::string, std::int32_t> ref_rule_;  // recursive $refs → their rule
    std::vector<std::string> pending_;            // refs whose rule is still to compile
    std::int32_t any_rule_ = -1;                  // the any-value rule, once needed
};

}  // namespace inkling::grammar
