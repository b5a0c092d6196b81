#include "grammar/nfa.h"

#include <algorithm>

#include "grammar/error.h"

namespace inkling::grammar {
namespace {

std::string utf8(std::uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

// Splits lo..hi (one encoded length, no surrogates) into pieces whose UTF-8 forms are a
// product of byte ranges: byte j of every code point lies in lo's..hi's byte j.
void utf8_pieces(std::uint32_t lo, std::uint32_t hi, std::vector<std::pair<std::string, std::string>>& out) {
    const std::size_t n = utf8(lo).size();
    for (std::size_t i = 1; i < n; ++i) {
        const std::uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_pieces(lo, lo | m, out);
                utf8_pieces((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                utf8_pieces(lo, (hi & ~m) - 1, out);
                utf8_pieces(hi & ~m, hi, out);
                return;
            }
        }
    }
    out.emplace_back(utf8(lo), utf8(hi));
}

}  // namespace

std::int32_t Nfa::state() {
    if (out.size() >= kMaxStates)
        throw Error("grammar too large: more than " + std::to_string(kMaxStates) +
                    " automaton states (a smaller maxItems/maxLength or fewer alternatives)");
    out.emplace_back();
    return static_cast<std::int32_t>(out.size() - 1);
}

void Nfa::bytes(std::int32_t from, std::int32_t to, std::uint8_t lo, std::uint8_t hi) {
    out[from].push_back({NfaEdge::Bytes, lo, hi, 0, to});
}

void Nfa::eps(std::int32_t from, std::int32_t to) { out[from].push_back({NfaEdge::Epsilon, 0, 0, 0, to}); }

Frag Nfa::empty() {
    const std::int32_t s = state();
    return {s, s};
}

Frag Nfa::literal(std::string_view text) {
    const std::int32_t start = state();
    std::int32_t at = start;
    for (char c : text) {
        const std::int32_t next = state();
        bytes(at, next, static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(c));
        at = next;
    }
    return {start, at};
}

Frag Nfa::byte_range(std::uint8_t lo, std::uint8_t hi) {
    Frag f{state(), state()};
    bytes(f.start, f.end, lo, hi);
    return f;
}

Frag Nfa::codepoints(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& ranges) {
    Frag f{state(), state()};
    for (auto [lo, hi] : ranges) {
        hi = std::min<std::uint32_t>(hi, 0x10FFFF);
        // Cut at each encoded-length boundary and around the surrogates.
        const std::uint32_t cuts[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
        for (const auto& c : cuts) {
            const std::uint32_t a = std::max(lo, c[0]), b = std::min(hi, c[1]);
            if (a > b) continue;
            std::vector<std::pair<std::string, std::string>> pieces;
            utf8_pieces(a, b, pieces);
            for (const auto& [plo, phi] : pieces) {
                std::int32_t at = f.start;
                for (std::size_t j = 0; j < plo.size(); ++j) {
                    const std::int32_t next = j + 1 == plo.size() ? f.end : state();
                    bytes(at, next, static_cast<std::uint8_t>(plo[j]), static_cast<std::uint8_t>(phi[j]));
                    at = next;
                }
            }
        }
    }
    return f;
}

Frag Nfa::token(std::int32_t id) {
    Frag f{state(), state()};
    out[f.start].push_back({NfaEdge::Token, 0, 0, id, f.end});
    return f;
}

Frag Nfa::call(std::int32_t rule) {
    Frag f{state(), state()};
    out[f.start].push_back({NfaEdge::Call, 0, 0, rule, f.end});
    return f;
}

Frag Nfa::seq(const std::vector<Frag>& parts) {
    if (parts.empty()) return empty();
    for (std::size_t i = 1; i < parts.size(); ++i) eps(parts[i - 1].end, parts[i].start);
    return {parts.front().start, parts.back().end};
}

Frag Nfa::alt(const std::vector<Frag>& choices) {
    Frag f{state(), state()};
    for (const Frag& c : choices) {
        eps(f.start, c.start);
        eps(c.end, f.end);
    }
    return f;
}

Frag Nfa::opt(Frag inner) {
    Frag f{state(), state()};
    eps(f.start, inner.start);
    eps(inner.end, f.end);
    eps(f.start, f.end);
    return f;
}

Frag Nfa::star(Frag inner) {
    Frag f{state(), state()};
    eps(f.start, inner.start);
    eps(inner.end, inner.start);
    eps(inner.end, f.end);
    eps(f.start, f.end);
    return f;
}

Frag Nfa::repeat(const std::function<Frag()>& make, std::int64_t min, std::int64_t max,
                 const std::function<Frag()>& sep) {
    // item (sep item){min-1} then (sep item)? ×(max-min), or (sep item)* when unbounded;
    // min 0 makes the whole thing optional.
    auto sep_item = [&] { return sep ? seq({sep(), make()}) : make(); };
    if (max == 0) return empty();
    if (max < 0 && min <= 1) {
        // item (sep item)*, with one copy of the item looping back through the separator:
        // nested arrays and objects would otherwise double at every level.
        Frag item = make();
        Frag f{state(), state()};
        eps(f.start, item.start);
        eps(item.end, f.end);
        if (sep) {
            Frag s = sep();
            eps(item.end, s.start);
            eps(s.end, item.start);
        } else {
            eps(item.end, item.start);
        }
        if (min == 0) eps(f.start, f.end);
        return f;
    }
    std::vector<Frag> parts{make()};
    for (std::int64_t i = 1; i < std::max<std::int64_t>(min, 1); ++i) parts.push_back(sep_item());
    if (max < 0) {
        parts.push_back(star(sep_item()));
    } else {
        // Nested optionals, so the tail "(sep item (sep item …)?)?" has one exit per count.
        Frag tail = empty();
        for (std::int64_t i = std::max<std::int64_t>(min, 1); i < max; ++i) tail = opt(seq({sep_item(), tail}));
        parts.push_back(tail);
    }
    Frag body = seq(parts);
    return min == 0 ? opt(body) : body;
}

}  // namespace inkling::grammar
