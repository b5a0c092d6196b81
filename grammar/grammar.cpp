#include "grammar/grammar.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "grammar/error.h"

namespace inkling::grammar {
namespace {

using StateSet = std::vector<std::int32_t>;  // sorted NFA states

void close(const Nfa& nfa, StateSet& set) {
    std::vector<std::int32_t> work(set.begin(), set.end());
    std::set<std::int32_t> seen(set.begin(), set.end());
    while (!work.empty()) {
        const std::int32_t s = work.back();
        work.pop_back();
        for (const NfaEdge& e : nfa.out[s])
            if (e.kind == NfaEdge::Epsilon && seen.insert(e.to).second) work.push_back(e.to);
    }
    set.assign(seen.begin(), seen.end());
}

}  // namespace

Grammar Grammar::compile(const Nfa& nfa, const std::vector<Frag>& rules) {
    Grammar g;
    // Byte classes: bytes no edge tells apart share a class (JSON grammars need ~40).
    std::vector<std::uint8_t> cut(257, 0);
    cut[0] = 1;
    for (const auto& edges : nfa.out)
        for (const NfaEdge& e : edges)
            if (e.kind == NfaEdge::Bytes) cut[e.lo] = cut[e.hi + 1u] = 1;
    std::vector<std::uint8_t> representative;
    for (int b = 0, cls = -1; b < 256; ++b) {
        if (cut[b]) {
            ++cls;
            representative.push_back(static_cast<std::uint8_t>(b));
        }
        g.byte_class_[b] = static_cast<std::uint8_t>(cls);
    }
    g.classes_ = representative.size();

    std::vector<bool> final_state(nfa.out.size(), false);
    for (const Frag& r : rules) final_state[r.end] = true;

    std::map<StateSet, std::int32_t> index;
    std::vector<StateSet> sets;
    auto intern = [&](StateSet set) -> std::int32_t {
        close(nfa, set);
        if (set.empty()) return -1;
        auto [it, fresh] = index.emplace(set, static_cast<std::int32_t>(sets.size()));
        if (fresh) {
            if (sets.size() >= kMaxStates)
                throw Error("grammar too large: more than " + std::to_string(kMaxStates) +
                            " deterministic states (fewer alternatives, or smaller bounds)");
            sets.push_back(std::move(set));
        }
        return it->second;
    };
    for (const Frag& r : rules) g.rule_start_.push_back(intern({r.start}));

    std::set<std::int32_t> token_ids;
    for (std::size_t d = 0; d < sets.size(); ++d) {
        const StateSet set = sets[d];  // copied: interning grows `sets`
        std::uint8_t flags = 0;
        std::map<std::int32_t, StateSet> by_token, by_call;
        for (std::int32_t s : set) {
            if (final_state[s]) flags |= kAccepting;
            for (const NfaEdge& e : nfa.out[s]) {
                if (e.kind == NfaEdge::Token) by_token[e.arg].push_back(e.to);
                if (e.kind == NfaEdge::Call) by_call[e.arg].push_back(e.to);
            }
        }
        std::vector<std::int32_t> row(g.classes_, -1);
        for (std::size_t c = 0; c < g.classes_; ++c) {
            const std::uint8_t b = representative[c];
            StateSet move;
            for (std::int32_t s : set)
                for (const NfaEdge& e : nfa.out[s])
                    if (e.kind == NfaEdge::Bytes && e.lo <= b && b <= e.hi) move.push_back(e.to);
            if (!move.empty()) row[c] = intern(std::move(move));
        }
        g.next_.insert(g.next_.end(), row.begin(), row.end());
        std::vector<Edge> toks, calls;
        for (auto& [id, to] : by_token) {
            toks.push_back({id, intern(to)});
            token_ids.insert(id);
        }
        for (auto& [rule, to] : by_call) calls.push_back({rule, intern(to)});
        if (!calls.empty()) flags |= kCalls;
        g.flags_.push_back(flags);
        g.tokens_.push_back(std::move(toks));
        g.calls_.push_back(std::move(calls));
    }
    g.token_ids_.assign(token_ids.begin(), token_ids.end());

    // Left recursion: rule A reaches a call of A again through call edges that read
    // nothing first (a call at a rule's start state, or at the start of a rule called so).
    const std::size_t R = g.rule_start_.size();
    for (std::size_t a = 0; a < R; ++a) {
        std::vector<bool> seen(R, false);
        std::vector<std::int32_t> work{static_cast<std::int32_t>(a)};
        while (!work.empty()) {
            const std::int32_t r = work.back();
            work.pop_back();
            for (const Edge& e : g.calls_[g.rule_start_[r]]) {
                if (e.arg == static_cast<std::int32_t>(a))
                    throw Error("left-recursive grammar: rule " + std::to_string(a) +
                                " reaches itself before reading anything (a $ref loop that consumes no text)");
                if (!seen[e.arg]) {
                    seen[e.arg] = true;
                    work.push_back(e.arg);
                }
            }
        }
    }
    return g;
}

}  // namespace inkling::grammar
