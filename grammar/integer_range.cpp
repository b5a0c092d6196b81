#include "grammar/integer_range.h"

#include <algorithm>
#include <string>
#include <vector>

namespace inkling::grammar {
namespace {

constexpr std::int64_t kMaxMagnitude = 9'999'999'999'999'999;  // 16 digits

Frag digit(Nfa& n, char lo, char hi) { return n.codepoints({{static_cast<std::uint32_t>(lo), static_cast<std::uint32_t>(hi)}}); }

// Digit strings of one width from x to y (same length, x <= y), leading zeros allowed.
Frag same_width(Nfa& n, const std::string& x, const std::string& y) {
    if (x.size() == 1) return digit(n, x[0], y[0]);
    const std::string xs = x.substr(1), ys = y.substr(1);
    if (x[0] == y[0]) return n.seq({digit(n, x[0], x[0]), same_width(n, xs, ys)});
    std::vector<Frag> alts;
    alts.push_back(n.seq({digit(n, x[0], x[0]), same_width(n, xs, std::string(xs.size(), '9'))}));
    if (y[0] - x[0] > 1)
        alts.push_back(n.seq({digit(n, static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1)),
                              n.repeat([&] { return digit(n, '0', '9'); }, static_cast<std::int64_t>(xs.size()),
                                       static_cast<std::int64_t>(xs.size()))}));
    alts.push_back(n.seq({digit(n, y[0], y[0]), same_width(n, std::string(ys.size(), '0'), ys)}));
    return n.alt(alts);
}

std::int64_t pow10(std::size_t k) {
    std::int64_t p = 1;
    for (std::size_t i = 0; i < k; ++i) p *= 10;
    return p;
}

// Magnitudes a..b (0 <= a <= b <= kMaxMagnitude), canonical decimal (no leading zeros).
Frag magnitudes(Nfa& n, std::int64_t a, std::int64_t b) {
    std::vector<Frag> alts;
    const std::size_t da = std::to_string(a).size(), db = std::to_string(b).size();
    for (std::size_t d = da; d <= db; ++d) {
        const std::int64_t lo = std::max(a, d == 1 ? 0 : pow10(d - 1)), hi = std::min(b, pow10(d) - 1);
        if (lo <= hi) alts.push_back(same_width(n, std::to_string(lo), std::to_string(hi)));
    }
    return alts.size() == 1 ? alts[0] : n.alt(alts);
}

}  // namespace

Frag integer_range(Nfa& n, std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
    const std::int64_t a = std::max(lo.value_or(-kMaxMagnitude), -kMaxMagnitude);
    const std::int64_t b = std::min(hi.value_or(kMaxMagnitude), kMaxMagnitude);
    std::vector<Frag> alts;
    if (b >= 0) alts.push_back(magnitudes(n, std::max<std::int64_t>(a, 0), b));
    // Negatives: "-" and a magnitude from max(1, -b) to -a ("-0" is never written).
    if (a < 0) alts.push_back(n.seq({n.literal("-"), magnitudes(n, std::max<std::int64_t>(1, -b), -a)}));
    return alts.size() == 1 ? alts[0] : n.alt(alts);
}

}  // namespace inkling::grammar
