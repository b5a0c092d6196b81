// A nondeterministic automaton over bytes, special-token ids and rule calls, built from
// Thompson fragments (one entry state, one exit state each). The JSON Schema compiler and
// the constraint compiler (constraint.h) build one Nfa for a whole grammar; dfa.h turns
// it into the deterministic tables the matcher runs.
//
//   Nfa n;
//   Frag f = n.seq({n.literal("{\"a\":"), n.codepoints({{'0', '9'}}), n.literal("}")});
//
// Repetition takes a maker, not a fragment, because every copy needs its own states.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace inkling::grammar {

struct NfaEdge {
    enum Kind : std::uint8_t { Bytes, Epsilon, Token, Call };
    Kind kind = Epsilon;
    std::uint8_t lo = 0, hi = 0;  // Bytes: the range lo..hi (inclusive)
    std::int32_t arg = 0;         // Token: the token id; Call: the rule
    std::int32_t to = 0;
};

struct Frag {
    std::int32_t start = 0, end = 0;
};

class Nfa {
public:
    // Grows past this many states are refused (Error "grammar too large"), so a hostile
    // schema (a maxItems of a million, deep nesting) costs bounded memory and time.
    static constexpr std::size_t kMaxStates = 2'000'000;

    std::int32_t state();
    void bytes(std::int32_t from, std::int32_t to, std::uint8_t lo, std::uint8_t hi);
    void eps(std::int32_t from, std::int32_t to);

    Frag empty();
    Frag literal(std::string_view bytes);
    Frag byte_range(std::uint8_t lo, std::uint8_t hi);
    // Any one code point of the inclusive ranges, as UTF-8 byte paths (surrogates are
    // never produced: U+D800..U+DFFF are cut out of every range).
    Frag codepoints(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& ranges);
    Frag token(std::int32_t id);
    Frag call(std::int32_t rule);
    Frag seq(const std::vector<Frag>& parts);
    Frag alt(const std::vector<Frag>& choices);
    Frag opt(Frag f);
    Frag star(Frag f);
    // min..max copies of make() (max < 0: unbounded); `sep` (if set) between copies.
    Frag repeat(const std::function<Frag()>& make, std::int64_t min, std::int64_t max,
                const std::function<Frag()>& sep = nullptr);

    std::vector<std::vector<NfaEdge>> out;  // edges by source state
};

}  // namespace inkling::grammar
