// Strict parsing of the header fields of the wire: whole-token decimal numbers (no
// sscanf: no signs where none belong, no hex, no inf/nan, no trailing garbage) and ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inkling::protocol {

// Decimal digits only, no sign, fits in u64.
std::optional<std::uint64_t> parse_u64(std::string_view token);
// A finite decimal number: [-]digits[.digits][(e|E)[+|-]digits]; no inf, nan or hex.
std::optional<double> parse_finite_double(std::string_view token);
// parse_finite_double, or the literals `nan` (nothing to condition on) and `-inf`
// (a token the model gives probability zero).
std::optional<double> parse_logprob(std::string_view token);

// Request ids: 1..max_chars bytes of [A-Za-z0-9._:-], and not the reserved "0".
bool is_valid_id(std::string_view id, std::size_t max_chars);

// Splits a header line at runs of spaces. Tabs and other control bytes stay inside
// tokens, where the field checks reject them.
std::vector<std::string_view> split_fields(std::string_view line);

// Text fit for an ERROR detail: printable ASCII kept, anything else as \xNN, cut to
// max_chars with an ellipsis.
std::string printable(std::string_view bytes, std::size_t max_chars = 48);

// Shortest decimal text that parses back to exactly the same double.
std::string format_double(double value);
// Fixed-point text with `decimals` digits after the point, in full for any finite double
// ("nan" for NaN, "inf"/"-inf").
std::string format_fixed(double value, int decimals);

}  // namespace inkling::protocol
