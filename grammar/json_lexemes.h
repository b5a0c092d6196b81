// The pieces of JSON text every JSON grammar is made of (RFC 8259), as NFA fragments:
// strings (escape-aware, whole UTF-8 characters), numbers with capped digit counts, and
// the whitespace gap between structural characters. Limits are part of the grammar so a
// model cannot run away inside one: at most 16 integer digits, 16 fraction digits and
// 3 exponent digits; a gap is nothing, one space, or one newline and up to 20 spaces.
#pragma once

#include "grammar/nfa.h"

namespace inkling::grammar {

enum class Whitespace {
    None,      // compact: no byte between tokens (the canonical form of tool arguments)
    Flexible,  // a gap after { [ , : and before } ]: "", " ", or "\n" + up to 20 spaces
};

Frag json_gap(Nfa& n, Whitespace ws);
// One character of string content: an unescaped code point ≥ U+0020 other than '"' and
// '\', or an escape (\" \\ \/ \b \f \n \r \t, \uXXXX outside the surrogates).
Frag json_string_char(Nfa& n);
// A whole string, quotes included; `min`..`max` characters (max < 0: unbounded).
Frag json_string(Nfa& n, std::int64_t min = 0, std::int64_t max = -1);
Frag json_integer(Nfa& n);
Frag json_number(Nfa& n);

}  // namespace inkling::grammar
