// JSON Schema string formats a grammar can express exactly, as the content between the
// quotes. Each accepts a subset of its RFC's strings and nothing outside it (a date is
// never 02-30: February stops at 28, since leap years are not regular), so output checked
// with a format validator passes:
//   date         YYYY-MM-DD (RFC 3339 full-date)
//   time         HH:MM:SS[.fraction](Z|±HH:MM) (RFC 3339 full-time, no leap second)
//   date-time    date "T" time
//   uuid         8-4-4-4-12 hex digits
//   ipv4         four decimal octets 0..255, no leading zeros
//   email        ASCII local part and dotted domain (letters, digits, ._%+- in the local part)
//   hostname     dotted labels of 1..63 letters, digits and inner hyphens
// Others (ipv6, duration, uri, regex …) are refused by name.
#pragma once

#include <optional>
#include <string>

#include "grammar/nfa.h"

namespace inkling::grammar {

// The fragment for `format`, or nullopt when the format is not one of the above.
std::optional<Frag> string_format(Nfa& n, const std::string& format);

}  // namespace inkling::grammar
