#include "grammar/string_formats.h"

namespace inkling::grammar {
namespace {

Frag digits(Nfa& n, int count) {
    return n.repeat([&] { return n.codepoints({{'0', '9'}}); }, count, count);
}

// Two digits from "lo" to "hi" (both two characters), as an alternation by first digit.
Frag two_digits(Nfa& n, const char* lo, const char* hi) {
    std::vector<Frag> alts;
    for (char a = lo[0]; a <= hi[0]; ++a) {
        const char from = a == lo[0] ? lo[1] : '0', to = a == hi[0] ? hi[1] : '9';
        alts.push_back(n.seq({n.literal(std::string(1, a)), n.codepoints({{static_cast<std::uint32_t>(from),
                                                                           static_cast<std::uint32_t>(to)}})}));
    }
    return n.alt(alts);
}

Frag date(Nfa& n) {
    auto month_day = [&](const char* months, const char* last_day) {
        std::vector<Frag> ms;
        for (const char* m = months; *m; m += 2) ms.push_back(n.literal(std::string(m, 2)));
        return n.seq({n.alt(ms), n.literal("-"), two_digits(n, "01", last_day)});
    };
    return n.seq({digits(n, 4), n.literal("-"),
                  n.alt({month_day("010305070810" "12", "31"), month_day("04060911", "30"), month_day("02", "28")})});
}

Frag time(Nfa& n) {
    Frag hms = n.seq({two_digits(n, "00", "23"), n.literal(":"), two_digits(n, "00", "59"), n.literal(":"),
                      two_digits(n, "00", "59")});
    Frag frac = n.opt(n.seq({n.literal("."), n.repeat([&] { return n.codepoints({{'0', '9'}}); }, 1, 9)}));
    Frag offset = n.alt({n.codepoints({{'Z', 'Z'}}), n.seq({n.codepoints({{'+', '+'}, {'-', '-'}}), two_digits(n, "00", "23"),
                                                           n.literal(":"), two_digits(n, "00", "59")})});
    return n.seq({hms, frac, offset});
}

Frag hex(Nfa& n, int count) {
    return n.repeat([&] { return n.codepoints({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}); }, count, count);
}

Frag octet(Nfa& n) {
    return n.alt({n.codepoints({{'0', '9'}}), n.seq({n.codepoints({{'1', '9'}}), n.codepoints({{'0', '9'}})}),
                  n.seq({n.literal("1"), digits(n, 2)}), n.seq({n.literal("2"), n.codepoints({{'0', '4'}}), digits(n, 1)}),
                  n.seq({n.literal("25"), n.codepoints({{'0', '5'}})})});
}

Frag alnum(Nfa& n) { return n.codepoints({{'0', '9'}, {'a', 'z'}, {'A', 'Z'}}); }

// A hostname label: 1..63 characters, letters and digits with hyphens inside.
Frag label(Nfa& n) {
    Frag inner = n.repeat([&] { return n.alt({alnum(n), n.literal("-")}); }, 0, 61);
    return n.seq({alnum(n), n.opt(n.seq({inner, alnum(n)}))});
}

}  // namespace

std::optional<Frag> string_format(Nfa& n, const std::string& format) {
    if (format == "date") return date(n);
    if (format == "time") return time(n);
    if (format == "date-time") return n.seq({date(n), n.literal("T"), time(n)});
    if (format == "uuid")
        return n.seq({hex(n, 8), n.literal("-"), hex(n, 4), n.literal("-"), hex(n, 4), n.literal("-"), hex(n, 4),
                      n.literal("-"), hex(n, 12)});
    if (format == "ipv4")
        return n.seq({octet(n), n.literal("."), octet(n), n.literal("."), octet(n), n.literal("."), octet(n)});
    if (format == "hostname")
        return n.seq({label(n), n.star(n.seq({n.literal("."), label(n)}))});
    if (format == "email") {
        // local@label.label…tld: words joined by . _ % + - before the @, hyphenated
        // labels after it, and a last label that starts with a letter.
        auto word = [&] { return n.seq({alnum(n), n.star(alnum(n))}); };
        Frag local = n.seq({word(), n.star(n.seq({n.codepoints({{'.', '.'}, {'_', '_'}, {'%', '%'}, {'+', '+'}, {'-', '-'}}),
                                                  word()}))});
        auto domain_label = [&] { return n.seq({word(), n.star(n.seq({n.literal("-"), word()}))}); };
        Frag labels = n.seq({domain_label(), n.literal("."), n.star(n.seq({domain_label(), n.literal(".")}))});
        Frag tld = n.seq({n.codepoints({{'a', 'z'}, {'A', 'Z'}}), n.star(alnum(n))});
        return n.seq({local, n.literal("@"), labels, tld});
    }
    return std::nullopt;
}

}  // namespace inkling::grammar
