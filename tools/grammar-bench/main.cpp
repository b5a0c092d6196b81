// grammar-bench TOKENIZER_JSON: how long a grammar mask over the whole vocabulary takes
// (docs/engine.md "Constrained decoding"). For each test schema, sample outputs are
// tokenized with the real tokenizer and walked token by token; at every position the
// mask is computed (timed) and the token accepted. Two runs per schema: as the engine
// serves (the mask cache warm from the earlier outputs of the same schema) and with the
// cache off (every mask walked). Prints JSON: per schema median, p99 and max in ms, and
// the median's ratio to the 1 ms budget of issue #15; a summary line per schema on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/tokenizer.h"
#include "engine/sampling/grammar_session.h"
#include "grammar/constraint.h"
#include "grammar/mask.h"

using namespace inkling;
using Clock = std::chrono::steady_clock;

namespace {

struct Case {
    const char* name;
    std::string constraint;
    std::vector<std::string> outputs;  // what a model might write (special tokens by text)
};

std::string schema(const std::string& s, const std::string& extra = "") {
    return R"({"type":"json_schema","schema":)" + s + extra + "}";
}

std::vector<Case> cases() {
    const std::string tool =
        R"({"type":"repeat","min":1,"max":2,"separator":{"type":"token","token":"<|message_model|>"},"item":)"
        R"({"type":"sequence","items":[{"type":"text","text":"get_weather"},{"type":"token","token":"<|content_invoke_tool_json|>"},)"
        R"({"type":"text","text":"{\"name\":\"get_weather\",\"args\":"},)"
        R"({"type":"json_schema","whitespace":"none","key_order":"sorted","schema":{"type":"object","properties":)"
        R"({"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["unit","city"],"additionalProperties":false}},)"
        R"({"type":"text","text":"}"},{"type":"token","token":"<|end_message|>"}]}})";
    return {
        {"flat-object",
         schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string","format":"email"},)"
                R"("tier":{"enum":["gold","silver","bronze"]},"active":{"type":"boolean"}},"required":["name","age","email","tier","active"],)"
                R"("additionalProperties":false})"),
         {R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "tier": "gold", "active": true})",
          R"({"name":"Grace Hopper, rear admiral, US Navy","age":85,"email":"grace.hopper@navy.mil","tier":"silver","active":false})",
          "{\n  \"name\": \"Линус Торвальдс\",\n  \"age\": 54,\n  \"email\": \"linus@kernel.org\",\n  \"tier\": \"bronze\",\n  \"active\": true\n}"}},
        {"nested-arrays",
         schema(R"({"type":"object","properties":{"title":{"type":"string"},"steps":{"type":"array","items":{"type":"object",)"
                R"("properties":{"n":{"type":"integer"},"text":{"type":"string"},"when":{"type":"string","format":"date-time"}},)"
                R"("required":["n","text","when"],"additionalProperties":false},"minItems":1,"maxItems":8},)"
                R"("tags":{"type":"array","items":{"type":"string"}}},"required":["title","steps","tags"],"additionalProperties":false})"),
         {R"({"title": "Make tea", "steps": [{"n": 1, "text": "Boil the water until it bubbles.", "when": "2024-05-06T07:08:09Z"}, {"n": 2, "text": "Steep the leaves for three minutes, then pour.", "when": "2024-05-06T07:11:09.500+02:00"}], "tags": ["kitchen", "morning", "tea"]})",
          R"({"title":"Deploy","steps":[{"n":1,"text":"git push origin main && wait for \"CI\" to pass","when":"2023-12-31T23:59:59Z"}],"tags":[]})"}},
        {"json-object",
         R"({"type":"json_object"})",
         {R"({"answer": 42, "reasons": ["it is the answer", {"source": "Douglas Adams", "year": 1979}], "confidence": 0.97, "final": true, "notes": null})",
          R"({"a":{"b":{"c":[1,2,[3,4,{"d":"deep"}]]}}})"}},
        {"recursive-ref",
         schema(R"({"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array",)"
                R"("items":{"$ref":"#/$defs/node"}}},"required":["name","children"],"additionalProperties":false}},"$ref":"#/$defs/node"})"),
         {R"({"name": "root", "children": [{"name": "left leaf", "children": []}, {"name": "right", "children": [{"name": "grandchild", "children": []}]}]})"}},
        {"tool-call",
         tool,
         {"get_weather<|content_invoke_tool_json|>{\"name\":\"get_weather\",\"args\":{\"city\":\"Paris, France\",\"unit\":\"celsius\"}}<|end_message|>",
          "get_weather<|content_invoke_tool_json|>{\"name\":\"get_weather\",\"args\":{\"city\":\"Tokyo\",\"unit\":\"fahrenheit\"}}<|end_message|>"
          "<|message_model|>get_weather<|content_invoke_tool_json|>{\"name\":\"get_weather\",\"args\":{\"city\":\"Oslo\",\"unit\":\"celsius\"}}<|end_message|>"}},
    };
}

double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: grammar-bench TOKENIZER_JSON\n");
        return 2;
    }
    const auto tok = model::Tokenizer::load(argv[1]);
    const std::int32_t eos = tok.find("<|content_model_end_sampling|>").value_or(-1);
    auto t0 = Clock::now();
    auto vocab = sampling::grammar_vocab(tok, tok.vocab_size(), eos);
    const double vocab_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    nlohmann::json report = {{"vocab", tok.vocab_size()}, {"vocab_build_ms", vocab_ms}, {"budget_ms", 1.0}, {"schemas", nlohmann::json::array()}};
    for (const Case& c : cases()) {
        t0 = Clock::now();
        auto g = grammar::compile_constraint(c.constraint, [&](const std::string& t) { return vocab->special_id(t); }, eos);
        const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        nlohmann::json row = {{"schema", c.name}, {"compile_ms", compile_ms}, {"states", g->states()}};
        for (const bool cached : {true, false}) {
            grammar::Masker masker(g, vocab);
            masker.set_cache(cached);
            std::vector<double> ms;
            std::size_t allowed_total = 0;
            for (const std::string& out : c.outputs) {
                grammar::Matcher m(g);
                grammar::Bits mask;
                std::vector<std::int32_t> ids = tok.encode(out);
                ids.push_back(eos);
                for (std::int32_t id : ids) {
                    const auto a = Clock::now();
                    masker.compute(m, mask);
                    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
                    if (!grammar::get_bit(mask, static_cast<std::size_t>(id))) {
                        std::fprintf(stderr, "grammar-bench: %s: token %d of the sample output is masked\n", c.name, id);
                        return 1;
                    }
                    for (auto w : mask) allowed_total += static_cast<std::size_t>(__builtin_popcountll(w));
                    if (id == eos) break;
                    if (!(vocab->is_special(id) ? m.accept_token(id) : m.accept_bytes(vocab->bytes(id)))) return 1;
                }
            }
            const char* mode = cached ? "served" : "uncached";
            row[mode] = {{"masks", ms.size()},
                         {"median_ms", pct(ms, 50)},
                         {"p99_ms", pct(ms, 99)},
                         {"max_ms", pct(ms, 100)},
                         {"mean_allowed", static_cast<double>(allowed_total) / static_cast<double>(ms.size())},
                         {"median_ratio_to_budget", pct(ms, 50) / 1.0}};
            std::fprintf(stderr, "grammar mask %-14s %-8s %4zu masks  median %.3f ms  p99 %.3f ms  max %.3f ms  (%.2fx the 1 ms budget)\n",
                         c.name, mode, ms.size(), pct(ms, 50), pct(ms, 99), pct(ms, 100), pct(ms, 50));
        }
        report["schemas"].push_back(row);
    }
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
}
