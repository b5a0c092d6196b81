// Integers between two bounds as a grammar: the digit strings of lo..hi (either side may be
// open), by the usual construction — split by digit count, then by leading digit, so each
// piece is a fixed digit followed by a free or recursively bounded tail. JSON Schema's
// minimum/maximum (and the exclusive ones) on "integer" compile to this. Bounds past 16
// digits are cut to 16 (the grammar's integer cap): every integer it writes is in range.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/nfa.h"

namespace inkling::grammar {

// Refuses nothing; the caller checks lo <= hi. nullopt = unbounded on that side.
Frag integer_range(Nfa& n, std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);

}  // namespace inkling::grammar
