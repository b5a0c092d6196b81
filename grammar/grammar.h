// A compiled grammar: every rule of an Nfa determinized into one table of states over
// byte classes, plus each state's special-token edges and rule calls. Rules exist only
// where the grammar recurses ($ref cycles, json_object's nested values); everything else
// is inlined, so most schemas are a single deterministic automaton.
//
//   Nfa n;  std::vector<Frag> rules = {...};          // rule 0 is the root
//   Grammar g = Grammar::compile(n, rules);
//   g.next(s, byte) → the state after `byte`, or -1
//
// Immutable after compile; shared by every request that sends the same constraint.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "grammar/nfa.h"

namespace inkling::grammar {

struct Edge {
    std::int32_t arg;  // the token id (token edges) or rule (calls)
    std::int32_t to;   // the state after the token, or where the caller resumes
};

class Grammar {
public:
    // Refuses (Error) a grammar whose determinized form passes kMaxStates, and one where
    // a rule can call itself before reading anything (left recursion: `$ref` loops that
    // consume no byte), which no parser of ours could finish.
    static constexpr std::size_t kMaxStates = 200'000;
    static Grammar compile(const Nfa& nfa, const std::vector<Frag>& rules);

    std::int32_t next(std::int32_t state, std::uint8_t byte) const {
        return next_[static_cast<std::size_t>(state) * classes_ + byte_class_[byte]];
    }
    bool accepting(std::int32_t state) const { return flags_[state] & kAccepting; }
    // Accepting or calling: a state where a parse may leave or enter a rule.
    bool branches(std::int32_t state) const { return flags_[state] & (kAccepting | kCalls); }
    const std::vector<Edge>& tokens(std::int32_t state) const { return tokens_[state]; }
    const std::vector<Edge>& calls(std::int32_t state) const { return calls_[state]; }
    std::int32_t rule_start(std::int32_t rule) const { return rule_start_[rule]; }
    std::int32_t root() const { return rule_start_[0]; }
    std::size_t states() const { return flags_.size(); }
    std::size_t classes() const { return classes_; }
    std::size_t rules() const { return rule_start_.size(); }
    // Every special-token id some state has an edge for (the mask adds those from the
    // current states' edges; all others stay masked).
    const std::vector<std::int32_t>& token_ids() const { return token_ids_; }

private:
    static constexpr std::uint8_t kAccepting = 1, kCalls = 2;
    std::array<std::uint8_t, 256> byte_class_{};
    std::size_t classes_ = 1;
    std::vector<std::int32_t> next_;  // state × class → state, -1 = no edge
    std::vector<std::uint8_t> flags_;
    std::vector<std::vector<Edge>> tokens_, calls_;
    std::vector<std::int32_t> rule_start_;
    std::vector<std::int32_t> token_ids_;
};

}  // namespace inkling::grammar
