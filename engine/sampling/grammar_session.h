// What the scheduler holds for constrained decoding: a GrammarLibrary of compiled
// constraints (by payload bytes, for the engine's one vocabulary) and one GrammarSession per
// request that carries a grammar. Requests without one never touch this code. The grammar
// itself (compiler, matcher, masks) is the grammar/ library; this is the engine's side of
// it: the tokenizer's entries as its vocabulary, and the sampler under its mask.
//
//   GrammarLibrary lib(tokenizer, unpadded_vocab, eos);
//   GrammarSession s(lib.get(payload));                 // throws grammar::Error: BAD_REQUEST
//   std::int32_t t = s.next(sampler, logits, history, greedy);   // sampled and accepted
#pragma once

#include <list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/tokenizer.h"
#include "engine/sampling/sampler.h"
#include "grammar/mask.h"

namespace inkling::sampling {

// The mask's vocabulary from the tokenizer: its ids below `size` (the model's unpadded
// vocabulary), added tokens marked.
std::shared_ptr<const grammar::Vocab> grammar_vocab(const model::Tokenizer& tokenizer, std::size_t size,
                                                    std::int32_t eos);

struct CompiledGrammar {
    std::shared_ptr<const grammar::Grammar> grammar;
    std::unique_ptr<grammar::Masker> masker;  // shared by the requests of this constraint (one thread)
};

class GrammarLibrary {
public:
    static constexpr std::size_t kEntries = 16;  // compiled constraints kept (LRU)
    GrammarLibrary(const model::Tokenizer& tokenizer, std::size_t vocab, std::int32_t eos);
    std::shared_ptr<CompiledGrammar> get(const std::string& payload);
    const std::shared_ptr<const grammar::Vocab>& vocab() const { return vocab_; }

private:
    const model::Tokenizer& tokenizer_;
    std::size_t size_;
    std::int32_t eos_;
    std::shared_ptr<const grammar::Vocab> vocab_;  // built at the first constrained request
    std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> entries_;  // most recent first
};

class GrammarSession {
public:
    explicit GrammarSession(std::shared_ptr<CompiledGrammar> compiled);
    // The next token from `logits` with every token the grammar refuses masked out, and
    // the grammar advanced past it. Greedy first tries the unmasked choice (an exact
    // shortcut: the best token overall is the best allowed one when it is allowed).
    // Throws std::runtime_error when the grammar allows no token at all.
    std::int32_t next(Sampler& sampler, std::span<const float> logits, std::span<const std::int32_t> history,
                      bool greedy);
    const grammar::Matcher& matcher() const { return matcher_; }

private:
    void accept(std::int32_t id);
    std::shared_ptr<CompiledGrammar> c_;
    grammar::Matcher matcher_;
    grammar::Bits mask_;
    std::vector<float> masked_;
};

}  // namespace inkling::sampling
