#include "grammar/json_lexemes.h"

namespace inkling::grammar {

Frag json_gap(Nfa& n, Whitespace ws) {
    if (ws == Whitespace::None) return n.empty();
    return n.alt({n.empty(), n.literal(" "),
                  n.seq({n.literal("\n"), n.repeat([&] { return n.literal(" "); }, 0, 20)})});
}

Frag json_string_char(Nfa& n) {
    auto hex = [&] { return n.codepoints({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}); };
    Frag plain = n.codepoints({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}});
    // \u then four hex digits that are not D800..DFFF (a lone surrogate is not a
    // character; most parsers take it, strict ones do not).
    Frag u = n.seq({n.literal("u"),
                    n.alt({n.seq({n.codepoints({{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}}), hex()}),
                           n.seq({n.codepoints({{'d', 'd'}, {'D', 'D'}}), n.codepoints({{'0', '7'}})})}),
                    hex(), hex()});
    Frag escape = n.seq({n.literal("\\"), n.alt({n.codepoints({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'},
                                                               {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                                 u})});
    return n.alt({plain, escape});
}

Frag json_string(Nfa& n, std::int64_t min, std::int64_t max) {
    Frag body = max < 0 && min == 0 ? n.star(json_string_char(n)) : n.repeat([&] { return json_string_char(n); }, min, max);
    return n.seq({n.literal("\""), body, n.literal("\"")});
}

Frag json_integer(Nfa& n) {
    Frag digits = n.alt({n.literal("0"), n.seq({n.codepoints({{'1', '9'}}),
                                                n.repeat([&] { return n.codepoints({{'0', '9'}}); }, 0, 15)})});
    return n.seq({n.opt(n.literal("-")), digits});
}

Frag json_number(Nfa& n) {
    auto digit = [&] { return n.codepoints({{'0', '9'}}); };
    Frag fraction = n.opt(n.seq({n.literal("."), n.repeat(digit, 1, 16)}));
    Frag exponent = n.opt(n.seq({n.codepoints({{'e', 'e'}, {'E', 'E'}}), n.opt(n.codepoints({{'+', '+'}, {'-', '-'}})),
                                 n.repeat(digit, 1, 3)}));
    return n.seq({json_integer(n), fraction, exponent});
}

}  // namespace inkling::grammar
