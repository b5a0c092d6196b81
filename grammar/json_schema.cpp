#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "grammar/error.h"
#include "grammar/integer_range.h"
#include "grammar/pattern.h"
#include "grammar/string_formats.h"

namespace inkling::grammar {
namespace {

using json = Json;

const std::set<std::string> kAnnotations = {"title",      "description", "default",  "examples", "$comment",
                                            "$schema",    "$id",         "deprecated", "readOnly", "writeOnly",
                                            "$defs",      "definitions"};
const std::set<std::string> kTaken = {"type",     "properties", "required", "additionalProperties",
                                      "enum",     "const",      "items",    "minItems",
                                      "maxItems", "anyOf",      "allOf",    "$ref",
                                      "format",   "minLength",  "maxLength", "pattern", "minimum",
                                      "maximum",  "exclusiveMinimum", "exclusiveMaximum"};
const char* const kBounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

std::string child(const std::string& at, const std::string& key) {
    std::string k;
    for (char c : key) k += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return at + "/" + k;
}

[[noreturn]] void refuse(const std::string& at, const std::string& why) {
    throw Error("schema at " + (at.empty() ? std::string("/") : at) + ": " + why);
}

std::string json_type(const json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "boolean";
    if (v.is_object()) return "object";
    if (v.is_array()) return "array";
    if (v.is_string()) return "string";
    if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
    const double d = v.get<double>();
    return d == static_cast<double>(static_cast<long long>(d)) ? "integer" : "number";
}

bool type_matches(const std::string& want, const json& v) {
    const std::string t = json_type(v);
    return want == t || (want == "number" && t == "integer");
}

std::int64_t bound(const json& s, const char* key, const std::string& at, std::int64_t limit) {
    const json& v = s.at(key);
    if (!v.is_number_integer() && !v.is_number_unsigned()) refuse(child(at, key), std::string(key) + " must be an integer");
    const auto n = v.get<std::int64_t>();
    if (n < 0) refuse(child(at, key), std::string(key) + " must not be negative");
    if (n > limit)
        refuse(child(at, key), std::string(key) + " " + std::to_string(n) + " is above the supported " + std::to_string(limit));
    return n;
}

}  // namespace

SchemaCompiler::SchemaCompiler(Nfa& nfa, std::vector<Frag>& rules, const json& root, JsonOptions options)
    : n_(nfa), rules_(rules), root_(root), opt_(options) {}

Frag SchemaCompiler::compile() { return value(root_, "", 0); }

Frag SchemaCompiler::any_object() { return map_of([&] { return any_value_call(); }); }

void SchemaCompiler::finish() {
    while (!pending_.empty()) {
        const std::string target = pending_.back();
        pending_.pop_back();
        expanding_ = {target};
        const Frag body = value(resolve(target, target), target.substr(1), 0);
        rules_[ref_rule_.at(target)] = body;
    }
}

const json& SchemaCompiler::resolve(const std::string& target, const std::string& at) const {
    if (target == "#") return root_;
    if (target.rfind("#/", 0) != 0)
        refuse(at, "$ref '" + target + "' is not a reference into this schema (\"#\" or \"#/…\")");
    try {
        const json& r = root_.at(json::json_pointer(target.substr(1)));
        return r;
    } catch (const json::exception&) {
        refuse(at, "$ref '" + target + "' does not resolve");
    }
}

Frag SchemaCompiler::ref(const std::string& target, const std::string& at, int depth) {
    if (auto it = ref_rule_.find(target); it != ref_rule_.end()) return n_.call(it->second);
    const json& s = resolve(target, at);
    if (std::find(expanding_.begin(), expanding_.end(), target) != expanding_.end()) {
        // Recursion: the ref becomes a rule (the occurrences inlined so far unroll it once).
        const auto rule = static_cast<std::int32_t>(rules_.size());
        rules_.push_back({});
        ref_rule_[target] = rule;
        pending_.push_back(target);
        return n_.call(rule);
    }
    expanding_.push_back(target);
    Frag f = value(s, target.substr(1), depth + 1);
    expanding_.pop_back();
    return f;
}

Frag SchemaCompiler::value(const json& s, const std::string& at, int depth) {
    if (depth > kMaxNesting) refuse(at, "nesting deeper than " + std::to_string(kMaxNesting) + " levels");
    if (s.is_boolean()) {
        if (!s.get<bool>()) refuse(at, "the schema false allows no value");
        return any_value_call();
    }
    if (!s.is_object()) refuse(at, "a schema must be an object or a boolean");
    for (const auto& [key, _] : s.items())
        if (!kAnnotations.count(key) && !kTaken.count(key)) refuse(at, "keyword '" + key + "' is not supported");
    // Keywords that must stand alone (with annotations) rather than combine.
    auto alone = [&](const char* keyword) {
        for (const auto& [key, _] : s.items())
            if (key != keyword && !kAnnotations.count(key))
                refuse(at, "keyword '" + key + "' beside '" + keyword + "' is not supported");
    };
    if (s.contains("$ref")) {
        alone("$ref");
        if (!s["$ref"].is_string()) refuse(child(at, "$ref"), "$ref must be a string");
        return ref(s["$ref"].get<std::string>(), child(at, "$ref"), depth);
    }
    if (s.contains("allOf")) {
        alone("allOf");
        const json& all = s["allOf"];
        if (!all.is_array() || all.size() != 1)
            refuse(child(at, "allOf"), "allOf is supported with exactly one schema (an intersection is not)");
        return value(all[0], child(child(at, "allOf"), "0"), depth + 1);
    }
    if (s.contains("anyOf")) {
        alone("anyOf");
        const json& any = s["anyOf"];
        if (!any.is_array() || any.empty()) refuse(child(at, "anyOf"), "anyOf must be a non-empty array of schemas");
        std::vector<Frag> alts;
        for (std::size_t i = 0; i < any.size(); ++i)
            alts.push_back(value(any[i], child(child(at, "anyOf"), std::to_string(i)), depth + 1));
        return n_.alt(alts);
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
        const json& t = s["type"];
        if (t.is_string()) types.push_back(t.get<std::string>());
        else if (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), [](const json& x) { return x.is_string(); }))
            for (const json& x : t) types.push_back(x.get<std::string>());
        else refuse(child(at, "type"), "type must be a type name or a non-empty array of them");
        for (const std::string& ty : types)
            if (ty != "object" && ty != "array" && ty != "string" && ty != "integer" && ty != "number" &&
                ty != "boolean" && ty != "null")
                refuse(child(at, "type"), "type '" + ty + "' is not a JSON Schema type");
    }

    if (s.contains("enum") || s.contains("const")) {
        const char* keyword = s.contains("enum") ? "enum" : "const";
        for (const auto& [key, _] : s.items())
            if (key != keyword && key != "type" && !kAnnotations.count(key))
                refuse(at, "keyword '" + key + "' beside '" + keyword + "' is not supported");
        std::vector<json> values;
        if (s.contains("enum")) {
            if (!s["enum"].is_array() || s["enum"].empty()) refuse(child(at, "enum"), "enum must be a non-empty array");
            values.assign(s["enum"].begin(), s["enum"].end());
        } else {
            values.push_back(s["const"]);
        }
        if (!types.empty())
            std::erase_if(values, [&](const json& v) {
                return std::none_of(types.begin(), types.end(), [&](const std::string& t) { return type_matches(t, v); });
            });
        if (values.empty()) refuse(child(at, keyword), "no value of '" + std::string(keyword) + "' has the schema's type");
        return literals(values);
    }

    if (types.empty()) {
        // No type: the keywords say which kind is meant; none at all is any value.
        if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
            types.push_back("object");
        else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) types.push_back("array");
        else if (s.contains("format") || s.contains("minLength") || s.contains("maxLength") || s.contains("pattern"))
            types.push_back("string");
        else if (std::any_of(std::begin(kBounds), std::end(kBounds), [&](const char* k) { return s.contains(k); }))
            types.push_back("integer");  // bounds alone: integers in range (a subset of the numbers allowed)
        else return any_value_call();
    }
    std::vector<Frag> alts;
    for (const std::string& t : types) alts.push_back(typed(t, s, at, depth));
    return alts.size() == 1 ? alts[0] : n_.alt(alts);
}

Frag SchemaCompiler::typed(const std::string& type, const json& s, const std::string& at, int depth) {
    if (type == "object") return object(s, at, depth);
    if (type == "array") return array(s, at, depth);
    if (type == "string") return string(s, at);
    if (type == "integer") return integer(s, at);
    if (type == "number") {
        for (const char* k : kBounds)
            if (s.contains(k)) refuse(child(at, k), std::string("keyword '") + k + "' on a number is not supported (on an integer it is)");
        return json_number(n_);
    }
    if (type == "boolean") return n_.alt({n_.literal("true"), n_.literal("false")});
    return n_.literal("null");
}

Frag SchemaCompiler::integer(const json& s, const std::string& at) {
    std::optional<std::int64_t> lo, hi;
    constexpr double kLimit = 9.2e18;  // inside int64: past it the bound cuts nothing of 16 digits
    auto bound_of = [&](const char* key) -> std::optional<double> {
        if (!s.contains(key)) return std::nullopt;
        const json& v = s[key];
        if (!v.is_number()) refuse(child(at, key), std::string(key) + " must be a number");
        return std::clamp(v.get<double>(), -kLimit, kLimit);
    };
    auto tighten_lo = [&](std::int64_t v) { lo = lo ? std::max(*lo, v) : v; };
    auto tighten_hi = [&](std::int64_t v) { hi = hi ? std::min(*hi, v) : v; };
    if (auto v = bound_of("minimum")) tighten_lo(static_cast<std::int64_t>(std::ceil(*v)));
    if (auto v = bound_of("exclusiveMinimum")) tighten_lo(static_cast<std::int64_t>(std::floor(*v)) + 1);
    if (auto v = bound_of("maximum")) tighten_hi(static_cast<std::int64_t>(std::floor(*v)));
    if (auto v = bound_of("exclusiveMaximum")) tighten_hi(static_cast<std::int64_t>(std::ceil(*v)) - 1);
    if (!lo && !hi) return json_integer(n_);
    constexpr std::int64_t kMax16 = 9'999'999'999'999'999;
    if ((lo && hi && *lo > *hi) || (lo && *lo > kMax16) || (hi && *hi < -kMax16))
        refuse(at, "no integer of at most 16 digits lies within the bounds");
    return integer_range(n_, lo, hi);
}

Frag SchemaCompiler::literals(const std::vector<json>& values) {
    std::vector<Frag> alts;
    std::set<std::string> seen;
    for (const json& v : values) {
        const std::string text = v.dump(-1, ' ', false, json::error_handler_t::strict);
        if (seen.insert(text).second) alts.push_back(n_.literal(text));
    }
    return alts.size() == 1 ? alts[0] : n_.alt(alts);
}

Frag SchemaCompiler::string(const json& s, const std::string& at) {
    if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) refuse(child(at, "pattern"), "pattern must be a string");
        if (s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
            refuse(at, "format/minLength/maxLength beside pattern is not supported");
        try {
            return n_.seq({n_.literal("\""), pattern_string_body(n_, s["pattern"].get<std::string>()), n_.literal("\"")});
        } catch (const Error& e) {
            refuse(child(at, "pattern"), e.what());
        }
    }
    if (s.contains("format")) {
        if (!s["format"].is_string()) refuse(child(at, "format"), "format must be a string");
        if (s.contains("minLength") || s.contains("maxLength"))
            refuse(at, "minLength/maxLength beside format is not supported");
        const std::string f = s["format"].get<std::string>();
        auto body = string_format(n_, f);
        if (!body) refuse(child(at, "format"), "format '" + f + "' is not supported");
        return n_.seq({n_.literal("\""), *body, n_.literal("\"")});
    }
    const std::int64_t min = s.contains("minLength") ? bound(s, "minLength", at, kMaxLengthBound) : 0;
    const std::int64_t max = s.contains("maxLength") ? bound(s, "maxLength", at, kMaxLengthBound) : -1;
    if (max >= 0 && min > max) refuse(at, "minLength is above maxLength");
    return json_string(n_, min, max);
}

Frag SchemaCompiler::array(const json& s, const std::string& at, int depth) {
    const json items = s.contains("items") ? s["items"] : json(true);
    if (!items.is_object() && !items.is_boolean())
        refuse(child(at, "items"), "items must be a schema (the array form of items is not supported)");
    const std::int64_t min = s.contains("minItems") ? bound(s, "minItems", at, kMaxItemsBound) : 0;
    const std::int64_t max = s.contains("maxItems") ? bound(s, "maxItems", at, kMaxItemsBound) : -1;
    if (max >= 0 && min > max) refuse(at, "minItems is above maxItems");
    const std::string item_at = child(at, "items");
    if (items.is_boolean() && !items.get<bool>() && min > 0) refuse(item_at, "items false with minItems above 0");
    Frag open = n_.seq({n_.literal("["), json_gap(n_, opt_.whitespace)});
    if (max == 0 || (items.is_boolean() && !items.get<bool>())) return n_.seq({open, n_.literal("]")});
    auto item = [&] { return value(items, item_at, depth + 1); };
    auto comma = [&] { return n_.seq({n_.literal(","), json_gap(n_, opt_.whitespace)}); };
    Frag list = n_.seq({n_.repeat(item, std::max<std::int64_t>(min, 1), max, comma), json_gap(n_, opt_.whitespace)});
    return n_.seq({open, min == 0 ? n_.opt(list) : list, n_.literal("]")});
}

Frag SchemaCompiler::map_of(const std::function<Frag()>& val) {
    const Whitespace ws = opt_.whitespace;
    auto member = [&] { return n_.seq({json_string(n_), n_.literal(":"), json_gap(n_, ws), val()}); };
    auto comma = [&] { return n_.seq({n_.literal(","), json_gap(n_, ws)}); };
    Frag list = n_.seq({n_.repeat(member, 1, -1, comma), json_gap(n_, ws)});
    return n_.seq({n_.literal("{"), json_gap(n_, ws), n_.opt(list), n_.literal("}")});
}

Frag SchemaCompiler::object(const json& s, const std::string& at, int depth) {
    const Whitespace ws = opt_.whitespace;
    const json props = s.contains("properties") ? s["properties"] : json::object();
    if (!props.is_object()) refuse(child(at, "properties"), "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
        const json& r = s["required"];
        if (!r.is_array()) refuse(child(at, "required"), "required must be an array of names");
        for (const json& name : r) {
            if (!name.is_string()) refuse(child(at, "required"), "required must be an array of names");
            if (!props.contains(name.get<std::string>()))
                refuse(child(at, "required"), "required names '" + name.get<std::string>() + "', which is not in properties");
            required.insert(name.get<std::string>());
        }
    }
    const json extra = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
    if (!extra.is_boolean() && !extra.is_object())
        refuse(child(at, "additionalProperties"), "additionalProperties must be a boolean or a schema");
    if (props.empty()) {
        if (extra.is_object()) {
            const std::string extra_at = child(at, "additionalProperties");
            return map_of([&] { return value(extra, extra_at, depth + 1); });
        }
        if (!extra.get<bool>()) return n_.seq({n_.literal("{"), json_gap(n_, ws), n_.literal("}")});
        return any_object();
    }
    if (extra.is_object())
        refuse(child(at, "additionalProperties"), "additionalProperties with a schema beside properties is not supported");

    std::vector<std::string> names;
    for (const auto& [key, _] : props.items()) names.push_back(key);
    if (opt_.key_order == KeyOrder::Sorted) std::sort(names.begin(), names.end());

    // Two tracks of states: A_i (no member written yet) and B_i (some written, so the
    // next one needs a comma). A_i exists only while every earlier property is optional.
    const std::size_t P = names.size();
    std::vector<std::int32_t> a(P + 1), b(P + 1);
    for (std::size_t i = 0; i <= P; ++i) a[i] = n_.state(), b[i] = n_.state();
    for (std::size_t i = 0; i < P; ++i) {
        const std::string& name = names[i];
        const std::string key = json(name).dump(-1, ' ', false, json::error_handler_t::strict);
        Frag member = n_.seq({n_.literal(key), n_.literal(":"), json_gap(n_, ws),
                              value(props[name], child(child(at, "properties"), name), depth + 1)});
        Frag comma = n_.seq({n_.literal(","), json_gap(n_, ws)});
        n_.eps(a[i], member.start);
        n_.eps(b[i], comma.start);
        n_.eps(comma.end, member.start);
        n_.eps(member.end, b[i + 1]);
        if (!required.count(name)) {
            n_.eps(a[i], a[i + 1]);
            n_.eps(b[i], b[i + 1]);
        }
    }
    Frag open = n_.seq({n_.literal("{"), json_gap(n_, ws)});
    Frag close = n_.literal("}");
    Frag tail = json_gap(n_, ws);
    n_.eps(open.end, a[0]);
    n_.eps(b[P], tail.start);
    n_.eps(tail.end, close.start);
    n_.eps(a[P], close.start);
    return {open.start, close.end};
}

Frag SchemaCompiler::any_value_call() {
    if (any_rule_ < 0) {
        any_rule_ = static_cast<std::int32_t>(rules_.size());
        rules_.push_back({});
        const Whitespace ws = opt_.whitespace;
        auto comma = [&] { return n_.seq({n_.literal(","), json_gap(n_, ws)}); };
        auto call = [&] { return n_.call(any_rule_); };
        Frag list = n_.seq({n_.repeat(call, 1, -1, comma), json_gap(n_, ws)});
        Frag arr = n_.seq({n_.literal("["), json_gap(n_, ws), n_.opt(list), n_.literal("]")});
        rules_[any_rule_] = n_.alt({map_of(call), arr, json_string(n_), json_number(n_), n_.literal("true"),
                                    n_.literal("false"), n_.literal("null")});
    }
    return n_.call(any_rule_);
}

}  // namespace inkling::grammar
