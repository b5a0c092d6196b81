// The vocabulary as the mask walks it, built once per tokenizer and shared by every
// grammar: the byte tokens in a flattened trie (depth-first, sorted by bytes; a node's
// `skip` jumps past its subtree, so a byte the grammar refuses drops every token that
// extends it at once), and the "string-safe" slice: tokens that are whole UTF-8
// characters with no '"', '\' or control byte. Inside a JSON string every one of those
// is allowed, so a string state ORs the slice in and walks only the other ~6k tokens
// (the `rest` trie) — the dense masks cost what the sparse ones do. A second slice, the
// "word" tokens (ASCII letters and digits only), serves the dense states outside strings
// that loop on letters and digits (an email's local part, a hostname's labels).
//
// Added (special) tokens are not bytes: they are allowed only where the grammar has an
// edge for their id, and EOS only where it may end.
//
// The vocabulary comes in as a list of tokens, not as a tokenizer, so that this library
// needs no model code: the engine lists its tokenizer's entries
// (engine/sampling/grammar_session.h, grammar_vocab).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inkling::grammar {

using Bits = std::vector<std::uint64_t>;
inline void set_bit(Bits& b, std::size_t i) { b[i >> 6] |= std::uint64_t{1} << (i & 63); }
inline bool get_bit(const Bits& b, std::size_t i) { return (b[i >> 6] >> (i & 63)) & 1; }

struct TrieNode {
    std::uint8_t byte;
    std::uint8_t depth;      // 1 for a first byte
    std::int32_t skip;       // index of the next node outside this subtree
    std::int32_t first_id;   // tokens ending here: ids[first_id .. first_id + count)
    std::int32_t count;
};

struct Trie {
    std::vector<TrieNode> nodes;
    std::vector<std::int32_t> ids;
    std::size_t max_depth = 0;
    // Tokens with these bytes (sorted, deduplicated by the caller).
    static Trie build(std::vector<std::pair<std::string, std::int32_t>> tokens);
};

// One entry of a tokenizer: its id, its bytes, and whether it is an added (special) token,
// whose bytes are its text ("<|end_message|>").
struct VocabToken {
    std::int32_t id;
    std::string_view bytes;
    bool added;
};

class Vocab {
public:
    // `tokens`: every token the tokenizer has, in id order, each id in [0, size) (throws
    // std::invalid_argument for one outside). `size`: the logit width the mask covers (the
    // model's unpadded vocabulary); ids not listed stay masked. `eos`: the end-of-turn token.
    static std::shared_ptr<const Vocab> build(std::span<const VocabToken> tokens, std::size_t size, std::int32_t eos);

    std::size_t size() const { return size_; }
    std::size_t words() const { return (size_ + 63) / 64; }
    std::int32_t eos() const { return eos_; }
    const Trie& all() const { return all_; }
    const Trie& rest() const { return rest_; }  // the byte tokens outside the slice
    const Bits& string_safe() const { return string_safe_; }
    const Trie& non_word() const { return non_word_; }  // the byte tokens outside the word slice
    const Bits& word() const { return word_; }
    bool is_special(std::int32_t id) const { return get_bit(special_, static_cast<std::size_t>(id)); }
    const std::string& bytes(std::int32_t id) const { return bytes_[id]; }
    // Looks an added token up by its text ("<|end_message|>"), for grammars that name one.
    std::int32_t special_id(const std::string& text) const;

private:
    std::size_t size_ = 0;
    std::int32_t eos_ = -1;
    Trie all_, rest_, non_word_;
    Bits string_safe_, word_, special_;
    std::vector<std::string> bytes_;
    std::vector<std::pair<std::string, std::int32_t>> specials_;
};

// Whole UTF-8 characters, none of them '"', '\' or below U+0020.
bool json_string_safe(std::string_view bytes);
// Only ASCII letters and digits (whatever the C locale says).
inline bool ascii_alnum(int b) { return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'); }
bool ascii_word(std::string_view bytes);

}  // namespace inkling::grammar
