#include "grammar/vocab.h"

#include <algorithm>
#include <stdexcept>

namespace inkling::grammar {

bool json_string_safe(std::string_view s) {
    if (s.empty()) return false;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t n;
        std::uint32_t cp;
        if (c < 0x80) {
            if (c < 0x20 || c == '"' || c == '\\') return false;
            ++i;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
        else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu;
        else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u;
        else return false;
        if (i + n > s.size()) return false;
        for (std::size_t k = 1; k < n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3Fu);
        }
        // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n;
    }
    return true;
}

bool ascii_word(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!ascii_alnum(static_cast<unsigned char>(c))) return false;
    return true;
}

Trie Trie::build(std::vector<std::pair<std::string, std::int32_t>> tokens) {
    std::sort(tokens.begin(), tokens.end());
    Trie t;
    std::vector<std::int32_t> open;  // node index per depth on the current path
    std::string path;
    for (const auto& [bytes, id] : tokens) {
        if (bytes.empty()) continue;
        // Common prefix with the path; close deeper nodes.
        std::size_t common = 0;
        while (common < path.size() && common < bytes.size() && path[common] == bytes[common]) ++common;
        while (open.size() > common) {
            t.nodes[open.back()].skip = static_cast<std::int32_t>(t.nodes.size());
            open.pop_back();
        }
        path.resize(common);
        for (std::size_t d = common; d < bytes.size(); ++d) {
            open.push_back(static_cast<std::int32_t>(t.nodes.size()));
            t.nodes.push_back({static_cast<std::uint8_t>(bytes[d]), static_cast<std::uint8_t>(d + 1), 0, 0, 0});
            path += bytes[d];
        }
        TrieNode& leaf = t.nodes[open.back()];
        if (leaf.count == 0) leaf.first_id = static_cast<std::int32_t>(t.ids.size());
        t.ids.push_back(id);
        ++leaf.count;
        t.max_depth = std::max(t.max_depth, bytes.size());
    }
    while (!open.empty()) {
        t.nodes[open.back()].skip = static_cast<std::int32_t>(t.nodes.size());
        open.pop_back();
    }
    return t;
}

std::shared_ptr<const Vocab> Vocab::build(std::span<const VocabToken> tokens, std::size_t size, std::int32_t eos) {
    auto v = std::make_shared<Vocab>();
    v->size_ = size;
    v->eos_ = eos;
    v->string_safe_.assign(v->words(), 0);
    v->word_.assign(v->words(), 0);
    v->special_.assign(v->words(), 0);
    v->bytes_.resize(size);
    std::vector<std::pair<std::string, std::int32_t>> all, rest, non_word;
    for (const VocabToken& t : tokens) {
        const auto id = t.id;
        if (id < 0 || static_cast<std::size_t>(id) >= size)
            throw std::invalid_argument("token " + std::to_string(id) + " is outside the vocabulary's " +
                                        std::to_string(size) + " ids");
        const auto i = static_cast<std::size_t>(id);
        const std::string_view b = t.bytes;
        if (b.size() > 255) throw std::runtime_error("token " + std::to_string(id) + " is longer than 255 bytes");
        if (t.added) {
            set_bit(v->special_, i);
            v->specials_.emplace_back(b, id);
            continue;
        }
        v->bytes_[i] = b;
        all.emplace_back(b, id);
        if (json_string_safe(b)) set_bit(v->string_safe_, i);
        else rest.emplace_back(b, id);
        if (ascii_word(b)) set_bit(v->word_, i);
        else non_word.emplace_back(b, id);
    }
    v->all_ = Trie::build(std::move(all));
    v->rest_ = Trie::build(std::move(rest));
    v->non_word_ = Trie::build(std::move(non_word));
    return v;
}

std::int32_t Vocab::special_id(const std::string& text) const {
    for (const auto& [b, id] : specials_)
        if (b == text) return id;
    return -1;
}

}  // namespace inkling::grammar
