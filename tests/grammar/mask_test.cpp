// The fast mask against brute force over the whole Inkling vocabulary (200k tokens): at
// grammar states sampled by random walks through several schemas' outputs, the Masker's
// bitset (cached and uncached) must equal, token by token, what feeding each token's
// bytes to a copy of the matcher says.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/mask.h"
#include "tests/grammar/grammar_harness.h"

using namespace inkling::grammar;

namespace {

// Every token, the slow way.
Bits brute_force(const Matcher& at, const Vocab& v) {
    Bits out(v.words(), 0);
    for (std::size_t id = 0; id < v.size(); ++id) {
        const auto t = static_cast<std::int32_t>(id);
        Matcher m = at;
        bool ok;
        if (t == v.eos()) ok = at.can_end();
        else if (v.is_special(t)) ok = m.accept_token(t);
        else ok = !v.bytes(t).empty() && m.accept_bytes(v.bytes(t));
        if (ok) set_bit(out, id);
    }
    return out;
}

std::size_t count(const Bits& b) {
    std::size_t n = 0;
    for (auto w : b) n += static_cast<std::size_t>(__builtin_popcountll(w));
    return n;
}

// A random walk: from each state one allowed byte (or special token) at random, so the
// prefixes visited are valid outputs-so-far; stops where only the end is left.
// `dense`: the walk must meet a state with more tokens allowed than this (inside a string:
// most of the vocabulary).
void walk_and_compare(const std::string& constraint, std::uint64_t seed, int states, std::size_t dense = 150000) {
    auto g = grammar_test::compile_text(constraint);
    auto v = grammar_test::vocab();
    Masker cached(g, v), uncached(g, v);
    uncached.set_cache(false);
    Matcher m(g);
    std::mt19937_64 rng(seed);
    int compared = 0;
    std::size_t densest = 0, sparsest = v->size();
    for (int step = 0; compared < states && step < 4000; ++step) {
        if (step % 5 == 0) {
            Bits fast, fast2;
            cached.compute(m, fast);
            uncached.compute(m, fast2);
            const Bits slow = brute_force(m, *v);
            CHECK_MESSAGE(fast == slow, constraint << " step " << step << ": fast " << count(fast) << " vs brute " << count(slow));
            CHECK(fast2 == slow);
            densest = std::max(densest, count(slow));
            sparsest = std::min(sparsest, count(slow));
            for (std::size_t id = 0; id < v->size(); id += 97)  // the single-token check agrees too
                CHECK(cached.allowed(m, static_cast<std::int32_t>(id)) == get_bit(slow, id));
            ++compared;
        }
        std::vector<int> bytes;
        for (int b = 0; b < 256; ++b) {
            Matcher probe = m;
            if (probe.accept_bytes(std::string(1, static_cast<char>(b)))) bytes.push_back(b);
        }
        std::vector<std::int32_t> toks;
        for (const Config& c : m.configs())
            for (const Edge& e : g->tokens(c.state)) toks.push_back(e.arg);
        if (bytes.empty() && toks.empty()) {
            CHECK(m.can_end());
            m = Matcher(g);  // start another output
            continue;
        }
        // A third of the steps take a byte that moves the structure on (closes a string,
        // an object, an array; the next member; a special token) when one is allowed, so
        // walks leave long strings and reach every part of the grammar.
        std::vector<int> structural;
        for (int b : bytes)
            if (b == '"' || b == '}' || b == ']' || b == ',' || b == ':' || b == '{' || b == '[') structural.push_back(b);
        if (rng() % 3 == 0 && !toks.empty()) {
            REQUIRE(m.accept_token(toks[rng() % toks.size()]));
        } else if (rng() % 2 == 0 && !structural.empty()) {
            REQUIRE(m.accept_bytes(std::string(1, static_cast<char>(structural[rng() % structural.size()]))));
        } else {
            const std::size_t pick = rng() % (bytes.size() + toks.size());
            if (pick < bytes.size()) REQUIRE(m.accept_bytes(std::string(1, static_cast<char>(bytes[pick]))));
            else REQUIRE(m.accept_token(toks[pick - bytes.size()]));
        }
    }
    CHECK(compared == states);
    // The walk met both kinds of state: inside a string (most of the vocabulary allowed)
    // and between tokens of the structure (a few allowed).
    CHECK_MESSAGE(densest > dense, "densest mask " << densest);
    CHECK_MESSAGE(sparsest < 2000, "sparsest mask " << sparsest);
}

}  // namespace

TEST_CASE("mask equals brute force: a flat object of strings, numbers and enums") {
    walk_and_compare(grammar_test::schema_node(
                         R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},)"
                         R"("score":{"type":"number"},"tier":{"enum":["gold","silver"]},"ok":{"type":"boolean"},)"
                         R"("code":{"type":"string","maxLength":3}},)"
                         R"("required":["name","age","score","tier","ok","code"],"additionalProperties":false})"),
                     1, 20);
}

TEST_CASE("mask equals brute force: nested arrays, optional keys and formats") {
    walk_and_compare(grammar_test::schema_node(
                         R"({"type":"object","properties":{"title":{"type":"string"},"items":{"type":"array","items":{"type":"object",)"
                         R"("properties":{"id":{"type":"string","format":"uuid"},"when":{"type":"string","format":"date"},)"
                         R"("note":{"type":["string","null"]}},"required":["id"]},"maxItems":3}},"required":["title","items"]})",
                         R"(,"whitespace":"none")"),
                     2, 20);
}

TEST_CASE("mask equals brute force: recursion (json_object and a $ref tree)") {
    walk_and_compare(R"({"type":"json_object"})", 3, 20);
    walk_and_compare(grammar_test::schema_node(
                         R"({"type":"object","properties":{"v":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#"}}},)"
                         R"("required":["v","kids"]})"),
                     4, 20);
}

TEST_CASE("mask equals brute force: a forced tool call with special tokens") {
    walk_and_compare(
        R"({"type":"repeat","min":1,"max":2,"separator":{"type":"token","token":"<|message_model|>"},"item":)"
        R"({"type":"sequence","items":[{"type":"text","text":"get_weather"},{"type":"token","token":"<|content_invoke_tool_json|>"},)"
        R"({"type":"text","text":"{\"name\":\"get_weather\",\"args\":"},)"
        R"({"type":"json_schema","whitespace":"none","key_order":"sorted","schema":{"type":"object","properties":)"
        R"({"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["unit","city"],"additionalProperties":false}},)"
        R"({"type":"text","text":"}"},{"type":"token","token":"<|end_message|>"}]}})",
        5, 20);
}

TEST_CASE("mask equals brute force: formats whose dense states loop on letters and digits") {
    walk_and_compare(grammar_test::schema_node(
                         R"({"type":"object","properties":{"mail":{"type":"string","format":"email"},)"
                         R"("host":{"type":"string","format":"hostname"}},"required":["mail","host"]})"),
                     6, 20, 20000);
}

TEST_CASE("mask: inside a string the slice does the work, and EOS only at the end") {
    auto g = grammar_test::compile_text(grammar_test::schema_node(R"({"type":"string"})"));
    auto v = grammar_test::vocab();
    Masker masker(g, v);
    Matcher m(g);
    REQUIRE(m.accept_bytes("\"ab"));
    Bits mask;
    masker.compute(m, mask);
    CHECK(count(mask) > 190000);  // nearly every token continues a string
    CHECK_FALSE(get_bit(mask, static_cast<std::size_t>(v->eos())));
    REQUIRE(m.accept_bytes("\""));
    masker.compute(m, mask);
    CHECK(count(mask) == 1);
    CHECK(get_bit(mask, static_cast<std::size_t>(v->eos())));
}
