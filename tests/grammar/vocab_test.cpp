// The mask's vocabulary from a plain token list (what the engine's tokenizer hands it,
// engine/sampling/grammar_session.h): bytes by id, added tokens by their text, the JSON
// string-safe slice, and ids outside the mask's width refused.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "grammar/vocab.h"

using namespace inkling::grammar;

TEST_CASE("a vocabulary built from a token list keeps bytes by id and finds added tokens by text") {
    const std::vector<VocabToken> tokens = {{0, "a", false}, {1, "\"", false}, {3, "<|end|>", true}};
    const auto v = Vocab::build(tokens, 5, 4);
    CHECK(v->size() == 5);
    CHECK(v->eos() == 4);
    CHECK(v->bytes(0) == "a");
    CHECK(v->bytes(2).empty());  // an id the list leaves out stays masked
    CHECK(v->is_special(3));
    CHECK_FALSE(v->is_special(0));
    CHECK(v->special_id("<|end|>") == 3);
    CHECK(v->special_id("<|other|>") == -1);
    CHECK(get_bit(v->string_safe(), 0));
    CHECK_FALSE(get_bit(v->string_safe(), 1));  // '"' ends a JSON string
}

TEST_CASE("a vocabulary refuses a token id outside the mask's width") {
    const std::vector<VocabToken> past = {{5, "x", false}};
    CHECK_THROWS_AS(Vocab::build(past, 5, 4), std::invalid_argument);
    const std::vector<VocabToken> negative = {{-1, "x", false}};
    CHECK_THROWS_AS(Vocab::build(negative, 5, 4), std::invalid_argument);
}
