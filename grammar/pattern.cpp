#include "grammar/pattern.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "grammar/error.h"
#include "grammar/json_lexemes.h"

namespace inkling::grammar {
namespace {

using Ranges = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
constexpr std::uint32_t kMaxCp = 0x10FFFF;
constexpr std::int64_t kMaxBound = 256;

Ranges normalise(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    for (auto [a, b] : r) {
        if (!out.empty() && a <= out.back().second + 1) out.back().second = std::max(out.back().second, b);
        else out.emplace_back(a, b);
    }
    return out;
}

Ranges complement(const Ranges& r) {
    Ranges out;
    std::uint32_t next = 0;
    for (auto [a, b] : normalise(r)) {
        if (a > next) out.emplace_back(next, a - 1);
        next = b + 1;
    }
    if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
    return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges kDot = complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});

struct Node {
    enum Kind { Chars, Seq, Alt, Repeat } kind;
    Ranges chars;
    std::vector<std::unique_ptr<Node>> kids;
    std::int64_t min = 0, max = 0;
};
using P = std::unique_ptr<Node>;

class Parser {
public:
    explicit Parser(const std::string& s) : s_(s) {}

    P parse() {
        P n = alt();
        if (i_ < s_.size()) fail("unbalanced ')'");
        return n;
    }

private:
    [[noreturn]] void fail(const std::string& why) const {
        throw Error("pattern '" + s_ + "': " + why + " (at offset " + std::to_string(i_) + ") is not supported");
    }
    bool more() const { return i_ < s_.size(); }
    char peek() const { return s_[i_]; }

    std::uint32_t code_point() {  // one UTF-8 character of the pattern
        const auto c = static_cast<unsigned char>(s_[i_]);
        std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (i_ + n > s_.size()) fail("a cut UTF-8 character");
        std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s_[i_ + k]) & 0x3Fu);
        i_ += n;
        return cp;
    }

    static P chars(Ranges r) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Chars;
        n->chars = normalise(std::move(r));
        return n;
    }

    P alt() {
        std::vector<P> alts;
        alts.push_back(seq());
        while (more() && peek() == '|') {
            ++i_;
            alts.push_back(seq());
        }
        if (alts.size() == 1) return std::move(alts[0]);
        auto n = std::make_unique<Node>();
        n->kind = Node::Alt;
        n->kids = std::move(alts);
        return n;
    }

    P seq() {
        auto n = std::make_unique<Node>();
        n->kind = Node::Seq;
        while (more() && peek() != '|' && peek() != ')') n->kids.push_back(quantified());
        return n;
    }

    std::int64_t number() {
        std::int64_t v = 0;
        bool any = false;
        while (more() && peek() >= '0' && peek() <= '9') {
            v = std::min<std::int64_t>(v * 10 + (peek() - '0'), 1'000'000);
            ++i_;
            any = true;
        }
        if (!any) fail("a {m,n} without a number");
        return v;
    }

    P quantified() {
        P atom = this->atom();
        while (more() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
            std::int64_t min = 0, max = -1;
            const char q = peek();
            ++i_;
            if (q == '+') min = 1;
            else if (q == '?') max = 1;
            else if (q == '{') {
                min = number();
                max = min;
                if (more() && peek() == ',') {
                    ++i_;
                    max = more() && peek() == '}' ? -1 : number();
                }
                if (!more() || peek() != '}') fail("an unclosed {m,n}");
                ++i_;
                if (min > kMaxBound || max > kMaxBound) fail("a repetition bound above " + std::to_string(kMaxBound));
                if (max >= 0 && min > max) fail("a {m,n} with m above n");
            }
            if (more() && peek() == '?') ++i_;  // lazy: the same strings
            auto n = std::make_unique<Node>();
            n->kind = Node::Repeat;
            n->min = min;
            n->max = max;
            n->kids.push_back(std::move(atom));
            atom = std::move(n);
        }
        return atom;
    }

    // An escape after '\' (inside a class or not): the characters it stands for.
    Ranges escape(bool in_class) {
        if (!more()) fail("a trailing '\\'");
        const char c = peek();
        ++i_;
        auto hex = [&](std::size_t digits) {
            if (i_ + digits > s_.size()) fail("a short hex escape");
            std::uint32_t v = 0;
            for (std::size_t k = 0; k < digits; ++k) {
                const char h = s_[i_ + k];
                const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) fail("a bad hex escape");
                v = v * 16 + static_cast<std::uint32_t>(d);
            }
            i_ += digits;
            return v;
        };
        switch (c) {
            case 'd': return kDigit;
            case 'D': return complement(kDigit);
            case 'w': return kWord;
            case 'W': return complement(kWord);
            case 's': return kSpace;
            case 'S': return complement(kSpace);
            case 'n': return {{'\n', '\n'}};
            case 't': return {{'\t', '\t'}};
            case 'r': return {{'\r', '\r'}};
            case 'f': return {{'\f', '\f'}};
            case 'v': return {{'\v', '\v'}};
            case '0': return {{0, 0}};
            case 'x': { const auto v = hex(2); return {{v, v}}; }
            case 'u': {
                const auto v = hex(4);
                if (v >= 0xD800 && v <= 0xDFFF) fail("a surrogate \\u escape");
                return {{v, v}};
            }
            case 'b': if (in_class) return {{'\b', '\b'}}; fail("a word boundary \\b");
            case 'B': fail("a word boundary \\B");
            case 'p': case 'P': fail("a Unicode property escape");
            case 'k': fail("a named backreference");
            default: break;
        }
        if (c >= '1' && c <= '9') fail("a backreference");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail(std::string("the escape \\") + c);
        --i_;
        const std::uint32_t cp = code_point();
        return {{cp, cp}};
    }

    P atom() {
        const char c = peek();
        if (c == '(') {
            ++i_;
            if (more() && peek() == '?') {
                if (i_ + 1 < s_.size() && s_[i_ + 1] == ':') i_ += 2;
                else fail("a lookaround or named group");
            }
            P inner = alt();
            if (!more() || peek() != ')') fail("an unclosed '('");
            ++i_;
            return inner;
        }
        if (c == '[') return klass();
        if (c == '.') {
            ++i_;
            return chars(kDot);
        }
        if (c == '\\') {
            ++i_;
            return chars(escape(false));
        }
        if (c == '^' || c == '$') fail("an anchor not at the pattern's start or end");
        if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier with nothing before it");
        const std::uint32_t cp = code_point();
        return chars({{cp, cp}});
    }

    P klass() {
        ++i_;  // '['
        bool negate = false;
        if (more() && peek() == '^') {
            negate = true;
            ++i_;
        }
        Ranges r;
        while (more() && peek() != ']') {
            Ranges lo;
            if (peek() == '\\') {
                ++i_;
                lo = escape(true);
            } else {
                const std::uint32_t cp = code_point();
                lo = {{cp, cp}};
            }
            if (lo.size() == 1 && lo[0].first == lo[0].second && i_ + 1 < s_.size() && peek() == '-' && s_[i_ + 1] != ']') {
                ++i_;
                std::uint32_t hi;
                if (peek() == '\\') {
                    ++i_;
                    Ranges h = escape(true);
                    if (h.size() != 1 || h[0].first != h[0].second) fail("a class range ending in a class escape");
                    hi = h[0].first;
                } else {
                    hi = code_point();
                }
                if (hi < lo[0].first) fail("a class range out of order");
                r.emplace_back(lo[0].first, hi);
            } else {
                r.insert(r.end(), lo.begin(), lo.end());
            }
        }
        if (!more()) fail("an unclosed '['");
        ++i_;
        return chars(negate ? complement(r) : r);
    }

    const std::string& s_;
    std::size_t i_ = 0;
};

// Characters as JSON string content: the ones that may stand raw, and '"', '\' and the
// controls as their escapes (one spelling each: the grammar needs only one).
Frag json_chars(Nfa& n, const Ranges& r) {
    std::vector<Frag> alts;
    Ranges raw;
    for (auto [a, b] : r) {
        for (std::uint32_t c = a; c <= std::min<std::uint32_t>(b, 0x1F); ++c) {
            static const char* const kShort[32] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                   "\\b",   "\\t",   "\\n",   nullptr, "\\f",   "\\r"};
            if (c < 14 && kShort[c]) alts.push_back(n.literal(kShort[c]));
            else {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                alts.push_back(n.literal(buf));
            }
        }
        const std::uint32_t from = std::max<std::uint32_t>(a, 0x20);
        for (std::uint32_t lo = from; lo <= b;) {
            // Cut out '"' (0x22) and '\' (0x5C).
            std::uint32_t hi = b;
            if (lo <= '"' && '"' <= hi) hi = std::min<std::uint32_t>(hi, '"' - 1);
            if (lo <= '\\' && '\\' <= hi) hi = std::min<std::uint32_t>(hi, '\\' - 1);
            if (lo == '"' || lo == '\\') {
                alts.push_back(n.literal(lo == '"' ? "\\\"" : "\\\\"));
                ++lo;
                continue;
            }
            raw.emplace_back(lo, hi);
            lo = hi + 1;
            if (hi == kMaxCp) break;
        }
    }
    if (!raw.empty()) alts.push_back(n.codepoints(raw));
    if (alts.empty()) throw Error("pattern: a class that matches no character is not supported");
    return alts.size() == 1 ? alts[0] : n.alt(alts);
}

Frag build(Nfa& n, const Node& node) {
    switch (node.kind) {
        case Node::Chars: return json_chars(n, node.chars);
        case Node::Seq: {
            std::vector<Frag> parts;
            for (const auto& k : node.kids) parts.push_back(build(n, *k));
            return n.seq(parts);
        }
        case Node::Alt: {
            std::vector<Frag> alts;
            for (const auto& k : node.kids) alts.push_back(build(n, *k));
            return n.alt(alts);
        }
        case Node::Repeat: return n.repeat([&] { return build(n, *node.kids[0]); }, node.min, node.max);
    }
    return n.empty();
}

}  // namespace

Frag pattern_string_body(Nfa& n, const std::string& pattern) {
    std::string body = pattern;
    const bool start = !body.empty() && body.front() == '^';
    if (start) body.erase(0, 1);
    // A trailing $ that is not escaped (an odd run of backslashes before it escapes it).
    bool end = false;
    if (!body.empty() && body.back() == '$') {
        std::size_t slashes = 0;
        for (std::size_t k = body.size() - 1; k > 0 && body[k - 1] == '\\'; --k) ++slashes;
        if (slashes % 2 == 0) {
            end = true;
            body.pop_back();
        }
    }
    Parser p(body);
    P tree = p.parse();
    std::vector<Frag> parts;
    if (!start) parts.push_back(n.star(json_string_char(n)));
    parts.push_back(build(n, *tree));
    if (!end) parts.push_back(n.star(json_string_char(n)));
    return n.seq(parts);
}

}  // namespace inkling::grammar
