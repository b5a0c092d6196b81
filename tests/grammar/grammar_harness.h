// What the grammar tests share: compiling a constraint against the Inkling tokenizer's
// special tokens, and asking whether a whole text is in its language.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/sampling/grammar_session.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "tests/support/inkling_tokenizer.h"

namespace grammar_test {

constexpr std::int32_t kEos = 200006;  // <|content_model_end_sampling|>

inline std::shared_ptr<const inkling::grammar::Vocab> vocab() {
    static auto v = inkling::sampling::grammar_vocab(test_support::inkling_tokenizer(),
                                                     test_support::inkling_tokenizer().vocab_size(), kEos);
    return v;
}

inline std::shared_ptr<const inkling::grammar::Grammar> compile(const nlohmann::json& constraint) {
    return inkling::grammar::compile_constraint(
        constraint.dump(), [](const std::string& t) { return vocab()->special_id(t); }, kEos);
}

// A json_schema constraint from schema text (keys keep their order).
inline std::string schema_node(const std::string& schema, const std::string& extra = "") {
    return R"({"type":"json_schema","schema":)" + schema + extra + "}";
}

inline std::shared_ptr<const inkling::grammar::Grammar> compile_text(const std::string& constraint) {
    return inkling::grammar::compile_constraint(
        constraint, [](const std::string& t) { return vocab()->special_id(t); }, kEos);
}

// The whole of `text` is a complete output of the grammar.
inline bool matches(const std::shared_ptr<const inkling::grammar::Grammar>& g, const std::string& text) {
    inkling::grammar::Matcher m(g);
    return m.accept_bytes(text) && m.can_end();
}

}  // namespace grammar_test
