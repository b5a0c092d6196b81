// The per-token mask: token t is allowed iff its bytes keep the output inside the
// grammar (a special token iff a current state has an edge for it; EOS iff the grammar
// may end here).
//
//   Masker masker(grammar, vocab);
//   Bits allowed;  masker.compute(matcher, allowed);   // vocab.words() words
//
// How it stays fast (docs/engine.md "Constrained decoding"): the walk runs the trie, so
// a refused byte skips every token under it; a state inside a JSON string ORs in the
// vocabulary's string-safe slice and walks only the tokens outside it; and the mask of a
// set of states with no callers to return to depends on those states alone, so it is
// kept (a bounded cache) and reused the next time the output stands there.
// Not thread-safe: one Masker serves one thread (the scheduler's).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "grammar/matcher.h"
#include "grammar/vocab.h"

namespace inkling::grammar {

class Masker {
public:
    static constexpr std::size_t kCacheEntries = 64;
    Masker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocab> vocab);
    void compute(Matcher& m, Bits& out);
    // The same answer for one token, without a mask (the greedy fast path).
    bool allowed(Matcher& m, std::int32_t id) const;
    void set_cache(bool on) { use_cache_ = on; }
    const Vocab& vocab() const { return *vocab_; }

private:
    bool slice_applies(std::int32_t state);
    bool word_slice_applies(std::int32_t state);
    void walk(const Trie& trie, const Configs& start, StackPool& pool, Bits& out);

    std::shared_ptr<const Grammar> g_;
    std::shared_ptr<const Vocab> vocab_;
    std::vector<std::int8_t> slice_, word_slice_;  // per state: -1 not yet known, 0 no, 1 yes
    std::vector<Configs> levels_;                // the walk's sets, by depth
    std::vector<std::int32_t> single_, stack_;   // by depth: the lone state (or -1) and its stack
    std::unordered_map<std::string, Bits> cache_;
    bool use_cache_ = true;
};

}  // namespace inkling::grammar
