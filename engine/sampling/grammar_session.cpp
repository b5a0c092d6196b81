#include "engine/sampling/grammar_session.h"

#include <limits>
#include <stdexcept>

#include "grammar/constraint.h"

namespace inkling::sampling {

std::shared_ptr<const grammar::Vocab> grammar_vocab(const model::Tokenizer& tok, std::size_t size, std::int32_t eos) {
    std::vector<grammar::VocabToken> tokens;
    for (std::size_t i = 0; i < size && i < tok.vocab_size(); ++i) {
        const auto id = static_cast<std::int32_t>(i);
        if (tok.has(id)) tokens.push_back({id, tok.token_bytes(id), tok.is_added(id)});
    }
    return grammar::Vocab::build(tokens, size, eos);
}

GrammarLibrary::GrammarLibrary(const model::Tokenizer& tokenizer, std::size_t vocab, std::int32_t eos)
    : tokenizer_(tokenizer), size_(vocab), eos_(eos) {}

std::shared_ptr<CompiledGrammar> GrammarLibrary::get(const std::string& payload) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->first == payload) {
            entries_.splice(entries_.begin(), entries_, it);
            return it->second;
        }
    if (!vocab_) vocab_ = grammar_vocab(tokenizer_, size_, eos_);
    auto g = grammar::compile_constraint(payload, [&](const std::string& t) { return vocab_->special_id(t); }, eos_);
    auto c = std::make_shared<CompiledGrammar>();
    c->grammar = g;
    c->masker = std::make_unique<grammar::Masker>(g, vocab_);
    entries_.emplace_front(payload, c);
    if (entries_.size() > kEntries) entries_.pop_back();
    return c;
}

GrammarSession::GrammarSession(std::shared_ptr<CompiledGrammar> compiled)
    : c_(std::move(compiled)), matcher_(c_->grammar) {}

void GrammarSession::accept(std::int32_t id) {
    const grammar::Vocab& v = c_->masker->vocab();
    if (id == v.eos()) return;
    const bool ok = v.is_special(id) ? matcher_.accept_token(id) : matcher_.accept_bytes(v.bytes(id));
    if (!ok) throw std::runtime_error("grammar: sampled token " + std::to_string(id) + " is outside the grammar");
}

std::int32_t GrammarSession::next(Sampler& sampler, std::span<const float> logits,
                                  std::span<const std::int32_t> history, bool greedy) {
    if (greedy) {
        const std::int32_t t = sampler.next(logits, history);
        if (c_->masker->allowed(matcher_, t)) {
            accept(t);
            return t;
        }
    }
    c_->masker->compute(matcher_, mask_);
    masked_.assign(logits.begin(), logits.end());
    bool any = false;
    for (std::size_t i = 0; i < masked_.size(); ++i) {
        if (grammar::get_bit(mask_, i)) any = true;
        else masked_[i] = -std::numeric_limits<float>::infinity();
    }
    if (!any) throw std::runtime_error("grammar: no token can continue the output");
    const std::int32_t t = sampler.next(masked_, history);
    accept(t);
    return t;
}

}  // namespace inkling::sampling
