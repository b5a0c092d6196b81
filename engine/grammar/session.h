// What the scheduler holds for constrained decoding: a Library of compiled constraints
// (by payload bytes, for the engine's one vocabulary) and one Session per request that
// carries a grammar. Requests without one never touch this code.
//
//   Library lib(tokenizer, unpadded_vocab, eos);
//   Session s(lib.get(payload));                       // throws Error: BAD_REQUEST
//   std::int32_t t = s.next(sampler, logits, history, greedy);   // sampled and accepted
#pragma once

#include <list>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "engine/grammar/mask.h"
#include "engine/model/tokenizer.h"
#include "engine/sampling/sampler.h"

namespace inkling::grammar {

struct Compiled {
    std::shared_ptr<const Grammar> grammar;
    std::unique_ptr<Masker> masker;  // shared by the requests of this constraint (one thread)
};

class Library {
public:
    static constexpr std::size_t kEntries = 16;  // compiled constraints kept (LRU)
    Library(const model::Tokenizer& tokenizer, std::size_t vocab, std::int32_t eos);
    std::shared_ptr<Compiled> get(const std::string& payload);
    const std::shared_ptr<const Vocab>& vocab() const { return vocab_; }

private:
    const model::Tokenizer& tokenizer_;
    std::size_t size_;
    std::int32_t eos_;
    std::shared_ptr<const Vocab> vocab_;  // built at the first constrained request
    std::list<std::pair<std::string, std::shared_ptr<Compiled>>> entries_;  // most recent first
};

class Session {
public:
    explicit Session(std::shared_ptr<Compiled> compiled);
    // The next token from `logits` with every token the grammar refuses masked out, and
    // the grammar advanced past it. Greedy first tries the unmasked choice (an exact
    // shortcut: the best token overall is the best allowed one when it is allowed).
    // Throws std::runtime_error when the grammar allows no token at all.
    std::int32_t next(sampling::Sampler& sampler, std::span<const float> logits, std::span<const std::int32_t> history,
                      bool greedy);
    const Matcher& matcher() const { return matcher_; }

private:
    void accept(std::int32_t id);
    std::shared_ptr<Compiled> c_;
    Matcher matcher_;
    Bits mask_;
    std::vector<float> masked_;
};

}  // namespace inkling::grammar
