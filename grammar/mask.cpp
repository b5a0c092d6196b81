#include "grammar/mask.h"

#include <algorithm>
#include <array>
#include <set>

namespace inkling::grammar {
namespace {

// UTF-8 as a small automaton over string-safe characters: state 0 is a character
// boundary; the others expect continuation bytes (4..7: the restricted second bytes of
// E0, ED, F0, F4). Returns the next state, or -1 where the byte cannot come.
int utf8_next(int u, std::uint8_t b) {
    switch (u) {
        case 0:
            if (b >= 0x20 && b < 0x80) return (b == '"' || b == '\\') ? -1 : 0;
            if (b >= 0xC2 && b <= 0xDF) return 1;
            if (b == 0xE0) return 4;
            if (b == 0xED) return 5;
            if (b >= 0xE1 && b <= 0xEF) return 2;
            if (b == 0xF0) return 6;
            if (b >= 0xF1 && b <= 0xF3) return 3;
            if (b == 0xF4) return 7;
            return -1;
        case 1: return b >= 0x80 && b <= 0xBF ? 0 : -1;
        case 2: return b >= 0x80 && b <= 0xBF ? 1 : -1;
        case 3: return b >= 0x80 && b <= 0xBF ? 2 : -1;
        case 4: return b >= 0xA0 && b <= 0xBF ? 1 : -1;
        case 5: return b >= 0x80 && b <= 0x9F ? 1 : -1;
        case 6: return b >= 0x90 && b <= 0xBF ? 2 : -1;
        case 7: return b >= 0x80 && b <= 0x8F ? 2 : -1;
    }
    return -1;
}

}  // namespace

Masker::Masker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocab> vocab)
    : g_(std::move(grammar)), vocab_(std::move(vocab)), slice_(g_->states(), -1), word_slice_(g_->states(), -1),
      levels_(vocab_->all().max_depth + 1), single_(levels_.size(), -1), stack_(levels_.size(), -1) {}

// True when the grammar can read, from `state`, every sequence of string-safe characters
// (every byte of them has an edge, whatever came before): then each token of the slice
// is allowed there. Checked once per state by running UTF-8's automaton beside the
// grammar's over every pair they reach; past kSliceProbe pairs (a length-bounded string
// still far from its bound) the answer is no, which only costs a full walk.
bool Masker::slice_applies(std::int32_t state) {
    constexpr std::size_t kSliceProbe = 4096;
    if (slice_[state] >= 0) return slice_[state] == 1;
    std::set<std::pair<int, std::int32_t>> seen{{0, state}};
    std::vector<std::pair<int, std::int32_t>> work{{0, state}};
    bool ok = true;
    while (ok && !work.empty()) {
        auto [u, x] = work.back();
        work.pop_back();
        for (int b = 0; b < 256 && ok; ++b) {
            const int u2 = utf8_next(u, static_cast<std::uint8_t>(b));
            if (u2 < 0) continue;
            const std::int32_t x2 = g_->next(x, static_cast<std::uint8_t>(b));
            if (x2 < 0 || seen.size() > kSliceProbe) ok = false;
            else if (seen.insert({u2, x2}).second) work.push_back({u2, x2});
        }
    }
    slice_[state] = ok ? 1 : 0;
    return ok;
}

// The same for the word slice: every run of ASCII letters and digits can be read.
bool Masker::word_slice_applies(std::int32_t state) {
    constexpr std::size_t kProbe = 4096;
    if (word_slice_[state] >= 0) return word_slice_[state] == 1;
    std::vector<std::int32_t> work{state};
    std::set<std::int32_t> seen{state};
    bool ok = true;
    while (ok && !work.empty()) {
        const std::int32_t x = work.back();
        work.pop_back();
        for (int b = 0; b < 256 && ok; ++b) {
            if (!ascii_alnum(b)) continue;
            const std::int32_t x2 = g_->next(x, static_cast<std::uint8_t>(b));
            if (x2 < 0 || seen.size() > kProbe) ok = false;
            else if (seen.insert(x2).second) work.push_back(x2);
        }
    }
    word_slice_[state] = ok ? 1 : 0;
    return ok;
}

void Masker::walk(const Trie& trie, const Configs& start, StackPool& pool, Bits& out) {
    // The hot path: one configuration in a state that neither calls nor ends a rule is a
    // state id per depth (single_[d] >= 0) and one table lookup per node; anything else
    // goes through the general set step.
    auto settle = [&](std::size_t d) {
        const Configs& c = levels_[d];
        single_[d] = c.size() == 1 && !g_->branches(c[0].state) ? c[0].state : -1;
    };
    levels_[0] = start;
    settle(0);
    if (single_[0] >= 0) stack_[0] = start[0].stack;
    const std::size_t n = trie.nodes.size();
    for (std::size_t i = 0; i < n;) {
        const TrieNode& node = trie.nodes[i];
        const std::size_t d = node.depth;
        if (const std::int32_t s = single_[d - 1]; s >= 0) {
            const std::int32_t t = g_->next(s, node.byte);
            if (t < 0) {
                i = static_cast<std::size_t>(node.skip);
                continue;
            }
            if (!g_->branches(t)) {
                single_[d] = t;
                stack_[d] = stack_[d - 1];
            } else {
                levels_[d].assign(1, Config{t, stack_[d - 1]});
                close(*g_, pool, levels_[d]);
                single_[d] = -1;
            }
        } else {
            step_byte(*g_, pool, levels_[d - 1], node.byte, levels_[d]);
            if (levels_[d].empty()) {
                i = static_cast<std::size_t>(node.skip);
                continue;
            }
            settle(d);
            if (single_[d] >= 0) stack_[d] = levels_[d][0].stack;
        }
        for (std::int32_t k = 0; k < node.count; ++k) set_bit(out, static_cast<std::size_t>(trie.ids[node.first_id + k]));
        ++i;
    }
}

void Masker::compute(Matcher& m, Bits& out) {
    const Configs& now = m.configs();
    out.assign(vocab_->words(), 0);
    // Key: the states, when no configuration has a caller (then nothing else matters).
    std::string key;
    const bool cacheable = use_cache_ && std::all_of(now.begin(), now.end(), [](const Config& c) { return c.stack < 0; });
    if (cacheable) {
        std::vector<std::int32_t> states;
        for (const Config& c : now) states.push_back(c.state);
        std::sort(states.begin(), states.end());
        key.assign(reinterpret_cast<const char*>(states.data()), states.size() * sizeof(std::int32_t));
        if (auto it = cache_.find(key); it != cache_.end()) {
            out = it->second;
            return;
        }
    }
    for (const Config& c : now)
        for (const Edge& e : g_->tokens(c.state))
            if (static_cast<std::size_t>(e.arg) < vocab_->size()) set_bit(out, static_cast<std::size_t>(e.arg));
    if (m.can_end() && vocab_->eos() >= 0 && static_cast<std::size_t>(vocab_->eos()) < vocab_->size())
        set_bit(out, static_cast<std::size_t>(vocab_->eos()));
    bool slice = false, word = false;
    for (const Config& c : now) slice = slice || slice_applies(c.state);
    for (const Config& c : now) word = word || (!slice && word_slice_applies(c.state));
    if (slice || word) {
        const Bits& bits = slice ? vocab_->string_safe() : vocab_->word();
        for (std::size_t w = 0; w < out.size(); ++w) out[w] |= bits[w];
        walk(slice ? vocab_->rest() : vocab_->non_word(), now, m.pool(), out);
    } else {
        walk(vocab_->all(), now, m.pool(), out);
    }
    if (cacheable) {
        if (cache_.size() >= kCacheEntries) cache_.clear();
        cache_.emplace(std::move(key), out);
    }
}

bool Masker::allowed(Matcher& m, std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab_->size()) return false;
    if (id == vocab_->eos()) return m.can_end();
    if (vocab_->is_special(id)) {
        for (const Config& c : m.configs())
            for (const Edge& e : g_->tokens(c.state))
                if (e.arg == id) return true;
        return false;
    }
    const std::string& b = vocab_->bytes(id);
    if (b.empty()) return false;
    Configs at = m.configs(), next;
    for (char ch : b) {
        step_byte(*g_, m.pool(), at, static_cast<std::uint8_t>(ch), next);
        if (next.empty()) return false;
        std::swap(at, next);
    }
    return true;
}

}  // namespace inkling::grammar
