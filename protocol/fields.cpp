#include "protocol/fields.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace inkling::protocol {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Checks the decimal-number grammar by hand so from_chars never sees inf, nan, hex or a
// leading '+', none of which the wire allows.
bool is_decimal_number(std::string_view s) {
    std::size_t i = 0;
    if (i < s.size() && s[i] == '-') ++i;
    std::size_t int_digits = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
    std::size_t frac_digits = 0;
    if (i < s.size() && s[i] == '.') {
        ++i;
        while (i < s.size() && is_digit(s[i])) ++i, ++frac_digits;
    }
    if (int_digits + frac_digits == 0) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        std::size_t exp_digits = 0;
        while (i < s.size() && is_digit(s[i])) ++i, ++exp_digits;
        if (exp_digits == 0) return false;
    }
    return i == s.size();
}

}  // namespace

std::optional<std::uint64_t> parse_u64(std::string_view token) {
    if (token.empty()) return std::nullopt;
    for (char c : token)
        if (!is_digit(c)) return std::nullopt;
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec != std::errc{} || end != token.data() + token.size()) return std::nullopt;
    return value;
}

std::optional<double> parse_finite_double(std::string_view token) {
    if (!is_decimal_number(token)) return std::nullopt;
    double value = 0.0;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec != std::errc{} || end != token.data() + token.size()) return std::nullopt;
    if (!std::isfinite(value)) return std::nullopt;
    return value;
}

std::optional<double> parse_logprob(std::string_view token) {
    if (token == "nan") return std::nan("");
    if (token == "-inf") return -HUGE_VAL;
    return parse_finite_double(token);
}

bool is_valid_id(std::string_view id, std::size_t max_chars) {
    if (id.empty() || id.size() > max_chars || id == "0") return false;
    for (char c : id) {
        bool ok = is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok) return false;
    }
    return true;
}

std::vector<std::string_view> split_fields(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && line[i] == ' ') ++i;
        std::size_t start = i;
        while (i < line.size() && line[i] != ' ') ++i;
        if (i > start) fields.push_back(line.substr(start, i - start));
    }
    return fields;
}

std::string printable(std::string_view bytes, std::size_t max_chars) {
    std::string out;
    for (char c : bytes) {
        if (out.size() >= max_chars) {
            out += "...";
            break;
        }
        auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f && c != '\\') {
            out += c;
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        }
    }
    return out;
}

std::string format_double(double value) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    if (ec != std::errc{}) return "0";
    return std::string(buf, end);
}

std::string format_fixed(double value, int decimals) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    // Room for every finite double: sign, 309 integer digits, the point and the decimals
    // (a 64-byte buffer wrote "0" for 1e300, which then read back as another number).
    std::string buf(static_cast<std::size_t>(320 + std::max(decimals, 0)), '\0');
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value, std::chars_format::fixed, decimals);
    if (ec != std::errc{}) return "0";  // unreachable: the buffer fits any double
    buf.resize(static_cast<std::size_t>(end - buf.data()));
    return buf;
}

}  // namespace inkling::protocol
