// The JSON Schema compiler, one construct at a time: what each accepts and refuses as a
// whole output, and each construct it refuses by name.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "grammar/error.h"
#include "tests/grammar/grammar_harness.h"

using grammar_test::compile_text;
using grammar_test::matches;
using grammar_test::schema_node;

namespace {

// Every `good` text is a whole output of the schema and no `bad` one is.
void check(const std::string& schema, const std::vector<std::string>& good, const std::vector<std::string>& bad,
           const std::string& extra = "") {
    auto g = compile_text(schema_node(schema, extra));
    for (const auto& t : good) CHECK_MESSAGE(matches(g, t), schema << " should accept " << t);
    for (const auto& t : bad) CHECK_MESSAGE(!matches(g, t), schema << " should refuse " << t);
}

std::string refusal(const std::string& schema) {
    try {
        compile_text(schema_node(schema));
    } catch (const inkling::grammar::Error& e) {
        return e.what();
    }
    return "(compiled)";
}

}  // namespace

TEST_CASE("json schema: scalar types") {
    check(R"({"type":"string"})", {R"("")", R"("héllo")", R"("a\"b\\c\n\u00e9")", R"("\ud7ff")"},
          {R"(abc)", R"("a)", R"("\x")", R"("\ud800")", "\"a\nb\"", R"("a" )"});
    check(R"({"type":"integer"})", {"0", "-7", "1234567890123456"}, {"01", "1.5", "-", "12345678901234567", "+1"});
    check(R"({"type":"number"})", {"0", "-0.5", "3.25e+10", "1E-3"}, {".5", "1.", "1e", "NaN", "1e1234"});
    check(R"({"type":"boolean"})", {"true", "false"}, {"True", "1"});
    check(R"({"type":"null"})", {"null"}, {"nil", ""});
    check(R"({"type":["string","null"]})", {R"("x")", "null"}, {"1"});
}

TEST_CASE("json schema: objects, required and optional properties, key order") {
    const std::string s = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},)"
                          R"("required":["b","a"],"additionalProperties":false})";
    check(s, {R"({"b":1,"a":"x"})", R"({ "b": 1, "a": "x" })", "{\n  \"b\": 1,\n  \"a\": \"x\"\n}"},
          {R"({"a":"x","b":1})", R"({"b":1})", R"({"b":1,"a":"x","c":2})", R"({"b":1,,"a":"x"})", R"({"b" :1,"a":"x"})"});
    check(s, {R"({"a":"x","b":1})"}, {R"({"b":1,"a":"x"})"}, R"(,"key_order":"sorted")");
    check(s, {R"({"b":1,"a":"x"})"}, {R"({ "b":1,"a":"x"})", R"({"b": 1,"a":"x"})"}, R"(,"whitespace":"none")");
    // Optional ones may be left out, in any combination, commas right.
    check(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},)"
          R"("required":["b"]})",
          {R"({"b":2})", R"({"a":1,"b":2})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
          {R"({})", R"({"a":1})", R"({,"b":2})", R"({"a":1,"c":3})", R"({"b":2,"a":1})"});
    check(R"({"type":"object","properties":{"a":{"type":"integer"}}})", {R"({})", R"({"a":1})"}, {R"({"z":1})"});
}

TEST_CASE("json schema: objects without properties") {
    check(R"({"type":"object","additionalProperties":false})", {"{}", "{ }"}, {R"({"a":1})"});
    check(R"({"type":"object","additionalProperties":{"type":"integer"}})", {"{}", R"({"x":1,"y":-2})"},
          {R"({"x":"1"})", R"({"x":1,})"});
    check(R"({"type":"object"})", {"{}", R"({"x":[1,{"y":null}],"z":"w"})"}, {"[]", R"({"x"})"});
}

TEST_CASE("json schema: enum and const") {
    check(R"({"enum":["red","green",3,null,{"k":[1]}]})", {R"("red")", R"("green")", "3", "null", R"({"k":[1]})"},
          {R"("blue")", R"("Red")", "4"});
    check(R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"});
    check(R"({"const":"fixed \"q\""})", {R"("fixed \"q\"")"}, {R"("fixed")"});
}

TEST_CASE("json schema: arrays, items, minItems and maxItems") {
    check(R"({"type":"array","items":{"type":"integer"}})", {"[]", "[1]", "[1, 2,3]", "[\n  1\n]"}, {"[1,]", "[,]", R"(["a"])"});
    check(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})", {"[1,2]", "[1,2,3]"},
          {"[]", "[1]", "[1,2,3,4]"});
    check(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
    check(R"({"type":"array"})", {"[]", R"([1,"a",{"b":[true]}])"}, {"[1"});
}

TEST_CASE("json schema: anyOf, allOf of one, nesting") {
    check(R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}]})",
          {"5", R"({"a":"x"})"}, {R"("5")", R"({"a":5})"});
    check(R"({"allOf":[{"type":"boolean"}],"description":"a flag"})", {"true"}, {"1"});
    check(R"({"type":"object","properties":{"p":{"type":"object","properties":{"q":{"type":"array",)"
          R"("items":{"type":"object","properties":{"r":{"type":"null"}},"required":["r"]}}},"required":["q"]}},"required":["p"]})",
          {R"({"p":{"q":[{"r":null},{"r":null}]}})"}, {R"({"p":{"q":[{"r":1}]}})"});
    // 60 nested arrays: each level holds one copy of its item (a copy per separator would
    // double the grammar at every level: 2^60 states).
    std::string deep = R"({"type":"integer"})", open, close;
    for (int i = 0; i < 60; ++i) {
        deep = R"({"type":"array","items":)" + deep + "}";
        open += "[";
        close += "]";
    }
    check(deep, {open + "1" + close, open.substr(1) + "[1,2],[3]" + close.substr(1)}, {open + close.substr(1)});
}

TEST_CASE("json schema: $defs, $ref and recursion") {
    check(R"({"$defs":{"id":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/$defs/id"}},"required":["a"]})",
          {R"({"a":1})"}, {R"({"a":"1"})"});
    // A linked list through $defs, and a tree through "#".
    const std::string list = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},)"
                             R"("next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},)"
                             R"("$ref":"#/$defs/node"})";
    check(list, {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
          {R"({"v":1,"next":{"v":2}})"});
    check(R"({"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},"required":["kids"]})",
          {R"({"kids":[]})", R"({"kids":[{"kids":[{"kids":[]}]}]})"}, {R"({"kids":[{}]})"});
    check(R"({"definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s"})", {R"("x")"}, {"1"});
}

TEST_CASE("json schema: string formats and lengths") {
    check(R"({"type":"string","format":"date"})", {R"("2024-02-28")", R"("1999-12-31")"},
          {R"("2024-02-30")", R"("2024-13-01")", R"("2024-04-31")", R"("24-01-01")"});
    check(R"({"type":"string","format":"date-time"})", {R"("2024-05-06T07:08:09Z")", R"("2024-05-06T23:59:59.123+05:30")"},
          {R"("2024-05-06 07:08:09Z")", R"("2024-05-06T24:00:00Z")"});
    check(R"({"type":"string","format":"time"})", {R"("12:00:00Z")"}, {R"("12:00Z")"});
    check(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"});
    check(R"({"type":"string","format":"ipv4"})", {R"("192.168.0.1")", R"("255.255.255.255")"}, {R"("256.1.1.1")", R"("01.1.1.1")"});
    check(R"({"type":"string","format":"email"})", {R"("a.b+c@example.co.uk")"}, {R"("a@b")", R"("@x.com")"});
    check(R"({"type":"string","format":"hostname"})", {R"("example.com")", R"("a-b.c")"}, {R"("-a.com")", R"("a..b")"});
    check(R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("a\nc")", R"("äöü")"}, {R"("a")", R"("abcd")"});
}

TEST_CASE("json schema: integer bounds, every integer of a span checked") {
    struct Span {
        std::string keys;
        long long lo, hi;  // the integers allowed, inclusive (±10^17: open)
    };
    const long long open = 100000000000000000LL;
    const std::vector<Span> spans = {{R"("minimum":-120,"maximum":345)", -120, 345},
                                     {R"("exclusiveMinimum":-1,"exclusiveMaximum":100)", 0, 99},
                                     {R"("minimum":7)", 7, open},
                                     {R"("maximum":-3)", -open, -3},
                                     {R"("minimum":0.5,"maximum":9.5)", 1, 9},
                                     {R"("minimum":-5,"maximum":-5)", -5, -5}};
    for (const Span& sp : spans) {
        auto g = compile_text(schema_node(R"({"type":"integer",)" + sp.keys + "}"));
        for (long long v = -1100; v <= 1100; ++v)
            CHECK_MESSAGE(matches(g, std::to_string(v)) == (v >= sp.lo && v <= sp.hi), sp.keys << ": " << v);
        CHECK_FALSE(matches(g, "-0"));
        CHECK_FALSE(matches(g, "007"));
        CHECK(matches(g, "9999999999999999") == (sp.hi == open));
        CHECK_FALSE(matches(g, "10000000000000000"));  // 17 digits: past the grammar's cap
    }
    // Bounds alone mean integers in range.
    check(R"({"minimum":1,"maximum":3})", {"1", "3"}, {"0", "4", "2.5"});
}

TEST_CASE("json schema: pattern, as JSON string content") {
    check(R"j({"type":"string","pattern":"^[A-Z]{2}-\\d{3,4}$"})j", {R"j("AB-123")j", R"j("ZZ-0000")j"},
          {R"j("ab-123")j", R"j("AB-12")j", R"j("AB-12345")j", R"j("xAB-123")j"});
    // Unanchored: anywhere in the string.
    check(R"j({"type":"string","pattern":"cat|dog"})j", {R"j("a cat!")j", R"j("dog")j", R"j("hotdogs")j"},
          {R"j("cow")j", R"j("")j"});
    // Characters JSON must escape are written escaped: a quote, a backslash, a newline.
    check(R"j({"type":"string","pattern":"^\"[^\"]*\"\\\\$"})j", {R"j("\"hi\"\\")j"}, {R"j("\"hi\"")j"});
    check(R"j({"type":"string","pattern":"^a\\nb$"})j", {R"j("a\nb")j"}, {"\"a\nb\""});
    // Groups, repetition, dot (not a newline), classes with escapes.
    check(R"j({"type":"string","pattern":"^(?:ab)+.?$"})j", {R"j("abab")j", R"j("abx")j", R"j("abé")j"},
          {R"j("abxy")j", R"j("ab\n")j"});
    check(R"j({"type":"string","pattern":"^[\\w.-]+@[a-z]+\\.(com|org)$"})j", {R"j("a.b-c_d@x.org")j"},
          {R"j("a@x.net")j"});
}

TEST_CASE("json schema: any value") {
    check("{}", {"1", R"("s")", R"({"a":[null,true]})", "[]"}, {"", "[1,]"});
    check("true", {"false"}, {"nope"});
}

TEST_CASE("json schema: every refusal names its construct") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"j({"type":"string","pattern":"^(?=a)"})j", "lookaround"},
        {R"j({"type":"string","pattern":"(a)\\1"})j", "backreference"},
        {R"j({"type":"string","pattern":"\\bword"})j", "word boundary"},
        {R"j({"type":"string","pattern":"\\p{L}"})j", "Unicode property"},
        {R"j({"type":"string","pattern":"a^b"})j", "anchor not at"},
        {R"j({"type":"string","pattern":"a{1000}"})j", "bound above 256"},
        {R"j({"type":"string","pattern":"(ab"})j", "unclosed '('"},
        {R"j({"type":"string","pattern":"a","maxLength":3})j", "beside pattern"},
        {R"({"type":"number","minimum":0})", "'minimum' on a number"},
        {R"({"type":"number","maximum":3})", "'maximum'"},
        {R"({"type":"number","exclusiveMinimum":3})", "'exclusiveMinimum'"},
        {R"({"type":"number","multipleOf":2})", "'multipleOf'"},
        {R"({"oneOf":[{"type":"string"}]})", "'oneOf'"},
        {R"({"not":{"type":"string"}})", "'not'"},
        {R"({"if":{"type":"string"},"then":{}})", "'if'"},
        {R"({"type":"object","patternProperties":{"^a":{}}})", "'patternProperties'"},
        {R"({"type":"array","prefixItems":[{}]})", "'prefixItems'"},
        {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
        {R"({"type":"object","minProperties":1})", "'minProperties'"},
        {R"({"allOf":[{"type":"string"},{"minLength":1}]})", "allOf"},
        {R"({"type":"string","format":"ipv6"})", "format 'ipv6'"},
        {R"({"type":"strang"})", "type 'strang'"},
        {"false", "false allows no value"},
        {R"({"$ref":"https://example.com/s.json"})", "$ref 'https://example.com/s.json'"},
        {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
        {R"({"$ref":"#/$defs/a","type":"string"})", "'type' beside '$ref'"},
        {R"({"enum":["a"],"maxLength":2})", "'maxLength' beside 'enum'"},
        {R"({"type":"array","maxItems":100000})", "maxItems 100000"},
        {R"({"type":"string","maxLength":5000})", "maxLength 5000"},
        {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'b', which is not in properties"},
        {R"({"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"}})", "additionalProperties with a schema"},
        {R"({"type":"array","items":[{"type":"string"}]})", "array form of items"},
        {R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", "left-recursive"},
        {R"({"type":"integer","enum":["x"]})", "no value of 'enum'"},
        {R"({"type":"integer","minimum":5,"exclusiveMaximum":5})", "no integer"},
        {R"({"type":"integer","minimum":"0"})", "minimum must be a number"},
    };
    for (const auto& [schema, needle] : cases) {
        const std::string why = refusal(schema);
        CHECK_MESSAGE(why.find(needle) != std::string::npos, schema << " → " << why);
        if (needle != "left-recursive") CHECK_MESSAGE(why.find("schema at") != std::string::npos, why);
    }
    // Where it is: the pointer into the schema.
    CHECK(refusal(R"({"type":"object","properties":{"x":{"type":"string","format":"ipv6"}}})").find("/properties/x") !=
          std::string::npos);
    CHECK(refusal(R"j({"type":"object","properties":{"x":{"type":"string","pattern":"\\b"}}})j")
              .find("/properties/x/pattern") != std::string::npos);
}

TEST_CASE("constraint nodes: text, tokens, sequences, repeats, and their refusals") {
    auto g = compile_text(R"({"type":"sequence","items":[{"type":"text","text":"f"},{"type":"token","token":"<|end_message|>"}]})");
    inkling::grammar::Matcher m(g);
    CHECK(m.accept_bytes("f"));
    CHECK_FALSE(m.can_end());
    const std::int32_t end_message = grammar_test::vocab()->special_id("<|end_message|>");
    REQUIRE(end_message == 200010);
    CHECK_FALSE(m.accept_token(200001));
    CHECK(m.accept_token(end_message));
    CHECK(m.can_end());
    CHECK(m.finished());

    auto r = compile_text(R"({"type":"repeat","item":{"type":"text","text":"ab"},"min":2,"max":3,"separator":{"type":"text","text":","}})");
    CHECK(matches(r, "ab,ab"));
    CHECK(matches(r, "ab,ab,ab"));
    CHECK_FALSE(matches(r, "ab"));
    CHECK_FALSE(matches(r, "ab,ab,ab,ab"));
    CHECK(matches(compile_text(R"({"type":"json_object"})"), R"({"a":[1,{"b":"c"}]})"));
    CHECK_FALSE(matches(compile_text(R"({"type":"json_object"})"), "[1]"));

    const std::vector<std::pair<std::string, std::string>> bad = {
        {"not json", "not JSON"},
        {R"({"type":"regex"})", "unknown node type 'regex'"},
        {R"({"type":"text","text":"a","extra":1})", "unknown key 'extra'"},
        {R"({"type":"token","token":"<|nope|>"})", "'<|nope|>' is not a special token"},
        {R"({"type":"token","token":"<|content_model_end_sampling|>"})", "end of the turn"},
        {R"({"type":"repeat","item":{"type":"text","text":"a"},"max":1000})", "max must be in 0..64"},
        {R"({"type":"json_schema","schema":{"type":"string"},"whitespace":"pretty"})", "whitespace is"},
        {R"({"type":"sequence","items":[{"type":"json_schema"}]})", "grammar at /items/0"},
    };
    for (const auto& [payload, needle] : bad) {
        std::string why = "(compiled)";
        try {
            compile_text(payload);
        } catch (const inkling::grammar::Error& e) {
            why = e.what();
        }
        CHECK_MESSAGE(why.find(needle) != std::string::npos, payload << " → " << why);
    }
}
