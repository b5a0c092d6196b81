// The Inkling tokenizer: byte-level BPE read from a Hugging Face `tokenizer.json`
// (docs/model.md, "Tokenizer").
//
//   auto tok = Tokenizer::load(dir / "tokenizer.json");
//   std::vector<std::int32_t> ids = tok.encode("<|message_user|><|content_text|>hi");
//   std::string text = tok.decode(ids);                  // the same bytes back
//   std::optional<std::int32_t> eos = tok.find("<|content_model_end_sampling|>");
//
// encode:
//  1. Added tokens (`added_tokens`, special or not) are cut out first, leftmost match
//     wins and among matches at one position the longest; each becomes one id. Their
//     lstrip/rstrip/single_word flags must be false (Inkling's are; load rejects others).
//  2. The text between them is split by the file's `Split` regex (the o200k pattern for
//     Inkling), run through PCRE2 with UTF + UCP, each segment on its own (so a lookahead
//     never sees past an added token). Empty matches are never taken (PCRE2_NOTEMPTY).
//     Letter/number classes follow PCRE2's Unicode tables (14.0 in Debian 12's 10.42);
//     the npm tiktoken build agrees on characters added since (they are not letters to
//     either), a newer tokenizer library might not.
//  3. Each piece is byte-level BPE'd: with `model.merges`, pairs merge in merges order
//     (a whole piece that is a vocab entry is taken directly when `ignore_merges` is
//     true); with no merges (a tiktoken-derived vocab) rank-BPE repeatedly merges the
//     adjacent pair whose concatenation has the lowest vocab id, and a whole piece in the
//     vocab is always taken directly — exactly tiktoken's algorithm.
// Invalid UTF-8 never fails: the regex runs with PCRE2_MATCH_INVALID_UTF, so no piece
// spans an invalid byte; each run of bytes the regex does not cover (for the o200k
// pattern: only invalid UTF-8) is BPE'd as a piece of its own. decode(encode(s)) == s
// holds for every byte string.
//
// decode writes added tokens literally and vocab tokens as their bytes; a UTF-8 character
// split across tokens comes out split (callers that stream text buffer incomplete tails).
//
// A Tokenizer is immutable after load; copies share the tables, and every const method
// may be called from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inkling::model {

class Tokenizer {
public:
    // Throws std::runtime_error naming the file and what is wrong: unreadable, not JSON,
    // not byte-level BPE, a vocab entry that is not byte-level-encoded, a duplicate id, a
    // merge naming an unknown token, no usable `Split` regex, a regex PCRE2 rejects, …
    static Tokenizer load(const std::filesystem::path& tokenizer_json);
    // The same from JSON text; `origin` names the input in error messages.
    static Tokenizer parse(std::string_view json_text, const std::string& origin);

    std::vector<std::int32_t> encode(std::string_view text) const;
    // The bytes of the tokens concatenated. Throws std::out_of_range for an unknown id.
    std::string decode(std::span<const std::int32_t> ids) const;
    // Bytes of one token (added tokens literally); std::out_of_range for unknown ids
    // (negative, ≥ vocab_size(), or a gap in the id space).
    const std::string& token_bytes(std::int32_t id) const;
    // Exact lookup: an added token's content, else a vocab entry in its byte-level-encoded
    // form as the file spells it (e.g. "Ġthe").
    std::optional<std::int32_t> find(std::string_view token_text) const;
    bool is_added(std::int32_t id) const;
    std::size_t vocab_size() const;  // 1 + highest id
    bool has(std::int32_t id) const;  // token_bytes(id) would not throw

private:
    struct Impl;
    explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

}  // namespace inkling::model
