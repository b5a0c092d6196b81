// JSON Schema `pattern` (an ECMA-262 regular expression over the string's characters) as
// the content of a JSON string: the grammar writes strings the regex matches, each
// character in a JSON encoding (a '"' as \", a newline as \n). Unanchored patterns match
// anywhere, as JSON Schema says: without ^ any text may come before, without $ after.
//
// Taken: literals, '.', classes [a-z] [^…], \d \D \w \W \s \S, escapes (\n \t \xHH \uHHHH,
// escaped punctuation), groups ( ) and (?: ), alternation, quantifiers * + ? {m} {m,}
// {m,n} (bounds ≤ 256; a lazy '?' after one changes nothing here), ^ at the start and $
// at the end. Refused, naming it: lookarounds, backreferences, \b \B, \p{…}, named groups,
// anchors elsewhere.
#pragma once

#include <string>

#include "grammar/nfa.h"

namespace inkling::grammar {

// Throws Error("pattern …") naming what it cannot take.
Frag pattern_string_body(Nfa& n, const std::string& pattern);

}  // namespace inkling::grammar
