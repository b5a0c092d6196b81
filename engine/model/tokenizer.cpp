#include "engine/model/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace inkling::model {
// Named rather than anonymous: Tokenizer::Impl derives from Tables.
namespace tokenizer_detail {

using json = nlohmann::json;

// Ids above this are refused at load: the id → bytes table is dense.
constexpr std::int64_t kMaxId = std::int64_t{1} << 26;
constexpr std::uint32_t kNoRank = std::numeric_limits<std::uint32_t>::max();

// ---- byte-level alphabet (GPT-2 bytes_to_unicode) ------------------------------------

// Code point (< 324) → byte, -1 for code points outside the alphabet.
struct ByteLevel {
    std::array<std::int16_t, 324> byte_of{};
    ByteLevel() {
        byte_of.fill(-1);
        int extra = 0;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
            byte_of[printable ? b : 256 + extra++] = static_cast<std::int16_t>(b);
        }
    }
};
const ByteLevel kByteLevel;

// Decodes a byte-level-encoded string (UTF-8 of the alphabet above) to raw bytes.
std::optional<std::string> byte_level_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        auto c = static_cast<unsigned char>(s[i]);
        std::uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xe0) == 0xc0 && i + 1 < s.size() &&
                   (static_cast<unsigned char>(s[i + 1]) & 0xc0) == 0x80) {
            cp = ((c & 0x1fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3fu);
            i += 2;
        } else {
            return std::nullopt;  // every code point of the alphabet is < U+0800
        }
        if (cp >= kByteLevel.byte_of.size() || kByteLevel.byte_of[cp] < 0) return std::nullopt;
        out.push_back(static_cast<char>(kByteLevel.byte_of[cp]));
    }
    return out;
}

// ---- hash tables ---------------------------------------------------------------------

std::uint64_t mix(std::uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

std::uint64_t hash_bytes(std::string_view s) {
    std::uint64_t h = 0x9e3779b97f4a7c15ull ^ (s.size() * 0xbf58476d1ce4e5b9ull);
    const char* p = s.data();
    std::size_t n = s.size();
    while (n >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        std::uint64_t w = 0;
        std::memcpy(&w, p, n);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    }
    return mix(h);
}

std::size_t table_size_for(std::size_t n) {
    std::size_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

// Bytes → id, open addressing; the keys live in one arena.
class BytesTable {
public:
    void reserve(std::size_t n) {
        entries_.reserve(n);
        rebuild(table_size_for(n));
    }
    // False when the bytes are already present.
    bool insert(std::string_view bytes, std::int32_t id) {
        if (2 * (entries_.size() + 1) > slots_.size()) rebuild(table_size_for(entries_.size() + 1));
        std::size_t slot = probe(bytes);
        if (slots_[slot] >= 0) return false;
        slots_[slot] = static_cast<std::int32_t>(entries_.size());
        entries_.push_back({static_cast<std::uint32_t>(arena_.size()),
                            static_cast<std::uint32_t>(bytes.size()), id});
        arena_.append(bytes);
        return true;
    }
    std::int32_t find(std::string_view bytes) const {
        std::int32_t e = slots_[probe(bytes)];
        return e < 0 ? -1 : entries_[e].id;
    }

private:
    struct Entry {
        std::uint32_t offset, length;
        std::int32_t id;
    };
    std::size_t probe(std::string_view bytes) const {
        std::size_t mask = slots_.size() - 1;
        for (std::size_t slot = hash_bytes(bytes) & mask;; slot = (slot + 1) & mask) {
            std::int32_t e = slots_[slot];
            if (e < 0) return slot;
            const Entry& entry = entries_[e];
            if (entry.length == bytes.size() &&
                std::memcmp(arena_.data() + entry.offset, bytes.data(), bytes.size()) == 0) {
                return slot;
            }
        }
    }
    void rebuild(std::size_t size) {
        slots_.assign(size, -1);
        std::size_t mask = size - 1;
        for (std::size_t e = 0; e < entries_.size(); ++e) {
            std::string_view key(arena_.data() + entries_[e].offset, entries_[e].length);
            std::size_t slot = hash_bytes(key) & mask;
            while (slots_[slot] >= 0) slot = (slot + 1) & mask;
            slots_[slot] = static_cast<std::int32_t>(e);
        }
    }
    std::string arena_;
    std::vector<Entry> entries_;
    std::vector<std::int32_t> slots_{std::vector<std::int32_t>(16, -1)};
};

// (left id, right id) → (merge rank, merged id), open addressing.
class PairTable {
public:
    struct Merge {
        std::uint32_t rank = kNoRank;
        std::int32_t id = -1;
    };
    void build(const std::vector<std::pair<std::uint64_t, Merge>>& merges) {
        slots_.assign(table_size_for(merges.size()), Slot{});
        for (const auto& [key, merge] : merges) {
            Slot& s = slots_[probe(key)];
            if (s.key == kEmpty) s = {key, merge};  // a repeated pair keeps its first rank
        }
    }
    Merge find(std::int32_t left, std::int32_t right) const {
        if (slots_.empty()) return {};
        const Slot& s = slots_[probe(key(left, right))];
        return s.key == kEmpty ? Merge{} : s.merge;
    }
    static std::uint64_t key(std::int32_t left, std::int32_t right) {
        return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
               static_cast<std::uint32_t>(right);
    }

private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
    struct Slot {
        std::uint64_t key = kEmpty;
        Merge merge;
    };
    std::size_t probe(std::uint64_t k) const {
        std::size_t mask = slots_.size() - 1;
        std::size_t slot = mix(k) & mask;
        while (slots_[slot].key != kEmpty && slots_[slot].key != k) slot = (slot + 1) & mask;
        return slot;
    }
    std::vector<Slot> slots_;
};

struct CodeDeleter {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchContextDeleter {
    void operator()(pcre2_match_context* context) const { pcre2_match_context_free(context); }
};
struct MatchDataDeleter {
    void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    int n = pcre2_get_error_message(code, buffer, sizeof buffer);
    return n < 0 ? "PCRE2 error " + std::to_string(code)
                 : std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
}

// Pieces up to this many bytes take the array path of the BPE, longer ones the heap.
constexpr std::size_t kShortPiece = 48;
// Per-call cache of multi-token pieces; it stops growing at this many entries.
constexpr std::size_t kCacheEntries = 1 << 16;

// Per-call working memory, reused across the pieces of one encode().
struct Scratch {
    std::vector<std::uint32_t> start, rank;  // the heap path's parts
    std::vector<std::int32_t> id, merged, prev, next;
    std::vector<std::uint64_t> heap;
    std::unordered_map<std::string_view, std::pair<std::uint32_t, std::uint32_t>> cache;
    std::vector<std::int32_t> cached;  // ids of the cached pieces, back to back
};

struct Tables {
    std::string origin;
    std::vector<std::string> bytes;    // id → bytes (added tokens: their content)
    std::vector<std::uint8_t> kind;    // id → 0 none, 1 vocab, 2 added
    BytesTable vocab;                  // vocab bytes → id (added tokens not included)
    std::array<std::int32_t, 256> byte_token{};
    bool rank_bpe = true;              // no merges: merge priority = id of the concatenation
    bool whole_piece = true;           // ignore_merges: a piece in the vocab is one token
    PairTable merges;

    struct Added {
        std::string content;
        std::int32_t id;
    };
    std::array<std::vector<Added>, 256> added_by_first;  // longest first
    std::array<bool, 256> added_first{};
    bool any_added = false;
    std::unordered_map<std::string, std::int32_t> added_by_content;

    std::unique_ptr<pcre2_code, CodeDeleter> regex;
    // Read-only during matching, so shared by all threads: lifts PCRE2's default match
    // limit (10 M backtracking steps), which a 10 MB run of spaces would exceed.
    std::unique_ptr<pcre2_match_context, MatchContextDeleter> match_context;

    [[noreturn]] void fail(const std::string& what) const {
        throw std::runtime_error(origin + ": " + what);
    }

    // The merge of two adjacent parts: [a_start, b_end) of the piece, ids a and b.
    PairTable::Merge pair(std::string_view piece, std::uint32_t a_start, std::uint32_t b_end,
                          std::int32_t a, std::int32_t b) const {
        if (!rank_bpe) return merges.find(a, b);
        std::int32_t id = vocab.find(piece.substr(a_start, b_end - a_start));
        if (id < 0) return {};
        return {static_cast<std::uint32_t>(id), id};
    }

    // Byte-level BPE of one pre-token, appended to `out`. Every round merges the pair of
    // lowest rank, the leftmost on ties — the order of tiktoken's and HF's merge loops.
    void bpe(std::string_view piece, std::vector<std::int32_t>& out, Scratch& s) const {
        const std::size_t n = piece.size();
        if (n == 0) return;
        if (n == 1) {
            out.push_back(byte_token[static_cast<unsigned char>(piece[0])]);
            return;
        }
        if (whole_piece) {
            std::int32_t id = vocab.find(piece);
            if (id >= 0) {
                out.push_back(id);
                return;
            }
        }
        // Pieces that take several tokens repeat a lot in real text: remember them for
        // the rest of this call (keys point into the caller's text).
        if (auto hit = s.cache.find(piece); hit != s.cache.end()) {
            auto [offset, count] = hit->second;
            out.insert(out.end(), s.cached.begin() + offset, s.cached.begin() + offset + count);
            return;
        }
        std::size_t before = out.size();
        if (n <= kShortPiece) {
            bpe_short(piece, out);
        } else {
            bpe_long(piece, out, s);
        }
        if (s.cache.size() < kCacheEntries) {
            s.cache.emplace(piece, std::pair{static_cast<std::uint32_t>(s.cached.size()),
                                             static_cast<std::uint32_t>(out.size() - before)});
            s.cached.insert(s.cached.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
        }
    }

    // Short pieces: parts in arrays, a linear scan for the best pair (as tiktoken does).
    void bpe_short(std::string_view piece, std::vector<std::int32_t>& out) const {
        const auto n = static_cast<std::uint32_t>(piece.size());
        std::uint32_t m = n;  // parts
        std::array<std::uint32_t, kShortPiece + 1> start;
        std::array<std::int32_t, kShortPiece> id;
        std::array<PairTable::Merge, kShortPiece> merge;  // part i with part i+1
        for (std::uint32_t i = 0; i < n; ++i) {
            start[i] = i;
            id[i] = byte_token[static_cast<unsigned char>(piece[i])];
        }
        start[n] = n;
        for (std::uint32_t i = 0; i + 1 < n; ++i) merge[i] = pair(piece, i, i + 2, id[i], id[i + 1]);
        while (m > 1) {
            std::uint32_t best = 0;
            for (std::uint32_t i = 1; i + 1 < m; ++i) {
                if (merge[i].rank < merge[best].rank) best = i;
            }
            if (merge[best].rank == kNoRank) break;
            id[best] = merge[best].id;
            for (std::uint32_t i = best + 1; i + 1 < m; ++i) {
                start[i] = start[i + 1];
                id[i] = id[i + 1];
                merge[i] = merge[i + 1];
            }
            start[m - 1] = start[m];
            --m;
            if (best + 1 < m) merge[best] = pair(piece, start[best], start[best + 2], id[best], id[best + 1]);
            if (best > 0) merge[best - 1] = pair(piece, start[best - 1], start[best + 1], id[best - 1], id[best]);
        }
        out.insert(out.end(), id.begin(), id.begin() + m);
    }

    // Long pieces (long words, runs of one character): parts form a linked list and a
    // min-heap of (rank, left part) picks the next merge, O(n log n).
    void bpe_long(std::string_view piece, std::vector<std::int32_t>& out, Scratch& s) const {
        const std::size_t n = piece.size();
        s.start.resize(n);
        s.rank.resize(n);
        s.id.resize(n);
        s.merged.resize(n);
        s.prev.resize(n);
        s.next.resize(n);
        s.heap.clear();
        for (std::size_t i = 0; i < n; ++i) {
            s.start[i] = static_cast<std::uint32_t>(i);
            s.id[i] = byte_token[static_cast<unsigned char>(piece[i])];
            s.prev[i] = static_cast<std::int32_t>(i) - 1;
            s.next[i] = i + 1 < n ? static_cast<std::int32_t>(i + 1) : -1;
        }
        auto push = [&](std::int32_t left) {
            std::int32_t right = s.next[left];
            PairTable::Merge m;
            if (right >= 0) {
                std::int32_t after = s.next[right];
                auto end = after < 0 ? static_cast<std::uint32_t>(n) : s.start[after];
                m = pair(piece, s.start[left], end, s.id[left], s.id[right]);
            }
            s.rank[left] = m.rank;
            s.merged[left] = m.id;
            if (m.rank != kNoRank) {
                s.heap.push_back((std::uint64_t{m.rank} << 32) | static_cast<std::uint32_t>(left));
                std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
            }
        };
        for (std::size_t i = 0; i < n; ++i) push(static_cast<std::int32_t>(i));
        while (!s.heap.empty()) {
            std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
            std::uint64_t top = s.heap.back();
            s.heap.pop_back();
            auto left = static_cast<std::int32_t>(top & 0xffffffffu);
            auto rank = static_cast<std::uint32_t>(top >> 32);
            // Stale entry: the part was merged away (rank reset below) or its pair changed
            // (a changed pair spans more bytes, so it never has the same rank again).
            if (s.rank[left] != rank) continue;
            std::int32_t right = s.next[left];
            s.id[left] = s.merged[left];
            s.rank[right] = kNoRank;
            s.next[left] = s.next[right];
            if (s.next[right] >= 0) s.prev[s.next[right]] = left;
            push(left);
            if (s.prev[left] >= 0) push(s.prev[left]);
        }
        for (std::int32_t i = 0; i >= 0; i = s.next[i]) out.push_back(s.id[i]);
    }

    // Pre-tokenizes one segment (text between added tokens) and BPEs every piece. Bytes
    // the regex leaves out (invalid UTF-8 under PCRE2_MATCH_INVALID_UTF) form pieces too.
    void encode_ordinary(std::string_view text, std::vector<std::int32_t>& out, Scratch& s,
                         pcre2_match_data* md) const {
        auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
        std::size_t offset = 0;
        while (offset < text.size()) {
            int rc = pcre2_match(regex.get(), subject, text.size(), offset, PCRE2_NOTEMPTY, md,
                                 match_context.get());
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
                // The interpreter keeps its backtracking frames on the heap.
                rc = pcre2_match(regex.get(), subject, text.size(), offset,
                                 PCRE2_NOTEMPTY | PCRE2_NO_JIT, md, match_context.get());
            }
            if (rc == PCRE2_ERROR_NOMATCH) {
                bpe(text.substr(offset), out, s);
                return;
            }
            if (rc < 0) {
                throw std::runtime_error(origin + ": pre-tokenizer regex failed at byte " +
                                         std::to_string(offset) + " of a segment: " +
                                         pcre2_message(rc));
            }
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
            if (ov[0] > offset) bpe(text.substr(offset, ov[0] - offset), out, s);
            bpe(text.substr(ov[0], ov[1] - ov[0]), out, s);
            offset = ov[1];
        }
    }

    // Leftmost added token at or after `from`, longest at that position.
    std::optional<std::pair<std::size_t, const Added*>> next_added(std::string_view text,
                                                                   std::size_t from) const {
        if (!any_added) return std::nullopt;
        for (std::size_t p = from; p < text.size(); ++p) {
            auto c = static_cast<unsigned char>(text[p]);
            if (!added_first[c]) continue;
            for (const Added& a : added_by_first[c]) {
                if (text.compare(p, a.content.size(), a.content) == 0) return std::pair{p, &a};
            }
        }
        return std::nullopt;
    }
};

std::int32_t parse_id(const Tables& impl, const json& v, const std::string& where) {
    if (!v.is_number_integer()) impl.fail(where + ": id is not an integer");
    auto id = v.get<std::int64_t>();
    if (id < 0 || id >= kMaxId) {
        impl.fail(where + ": id " + std::to_string(id) + " is outside [0, " + std::to_string(kMaxId) + ")");
    }
    return static_cast<std::int32_t>(id);
}

void set_token(Tables& impl, std::int32_t id, std::string bytes, std::uint8_t kind) {
    if (static_cast<std::size_t>(id) >= impl.bytes.size()) {
        impl.bytes.resize(static_cast<std::size_t>(id) + 1);
        impl.kind.resize(static_cast<std::size_t>(id) + 1, 0);
    }
    impl.bytes[id] = std::move(bytes);
    impl.kind[id] = kind;
}

void load_vocab(Tables& impl, const json& model) {
    auto vocab_it = model.find("vocab");
    if (vocab_it == model.end() || !vocab_it->is_object()) impl.fail("model.vocab is missing or not an object");
    const json& vocab = *vocab_it;
    if (vocab.empty()) impl.fail("model.vocab is empty");
    impl.vocab.reserve(vocab.size());
    impl.bytes.reserve(vocab.size() + 128);
    for (const auto& [key, value] : vocab.items()) {
        std::string where = "model.vocab entry " + json(key).dump();
        std::int32_t id = parse_id(impl, value, where);
        auto raw = byte_level_decode(key);
        if (!raw) impl.fail(where + " is not byte-level-encoded (is this a byte-level BPE tokenizer?)");
        if (raw->empty()) impl.fail(where + " is empty");
        if (static_cast<std::size_t>(id) < impl.kind.size() && impl.kind[id] != 0) {
            impl.fail(where + ": id " + std::to_string(id) + " is used twice");
        }
        if (!impl.vocab.insert(*raw, id)) impl.fail(where + ": the same bytes appear twice");
        set_token(impl, id, std::move(*raw), 1);
    }
    for (int b = 0; b < 256; ++b) {
        std::int32_t id = impl.vocab.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
        if (id < 0) {
            std::ostringstream hex;
            hex << std::hex << b;
            impl.fail("model.vocab has no token for the single byte 0x" + hex.str() +
                      " (a byte-level BPE vocab must cover all 256 bytes)");
        }
        impl.byte_token[b] = id;
    }
}

void load_merges(Tables& impl, const json& model) {
    auto it = model.find("merges");
    if (it == model.end() || it->is_null()) return;
    if (!it->is_array()) impl.fail("model.merges is not an array");
    if (it->empty()) return;
    impl.rank_bpe = false;
    impl.whole_piece = model.value("ignore_merges", false);
    std::vector<std::pair<std::uint64_t, PairTable::Merge>> merges;
    merges.reserve(it->size());
    std::uint32_t rank = 0;
    for (const json& m : *it) {
        std::string where = "model.merges[" + std::to_string(rank) + "]";
        std::string left, right;
        if (m.is_string()) {
            const auto& s = m.get_ref<const std::string&>();
            auto space = s.find(' ');
            if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
                impl.fail(where + " " + m.dump() + " is not two tokens separated by one space");
            }
            left = s.substr(0, space);
            right = s.substr(space + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            left = m[0].get<std::string>();
            right = m[1].get<std::string>();
        } else {
            impl.fail(where + " is neither \"a b\" nor [\"a\", \"b\"]");
        }
        auto l = byte_level_decode(left), r = byte_level_decode(right);
        std::int32_t lid = l ? impl.vocab.find(*l) : -1, rid = r ? impl.vocab.find(*r) : -1;
        if (lid < 0) impl.fail(where + ": " + json(left).dump() + " is not in model.vocab");
        if (rid < 0) impl.fail(where + ": " + json(right).dump() + " is not in model.vocab");
        std::int32_t merged = impl.vocab.find(*l + *r);
        if (merged < 0) impl.fail(where + ": the merged token " + json(left + right).dump() + " is not in model.vocab");
        merges.push_back({PairTable::key(lid, rid), {rank, merged}});
        ++rank;
    }
    impl.merges.build(merges);
}

void load_added(Tables& impl, const json& root) {
    auto it = root.find("added_tokens");
    if (it == root.end() || it->is_null()) return;
    if (!it->is_array()) impl.fail("added_tokens is not an array");
    std::size_t index = 0;
    for (const json& t : *it) {
        std::string where = "added_tokens[" + std::to_string(index++) + "]";
        if (!t.is_object()) impl.fail(where + " is not an object");
        auto content = t.find("content");
        if (content == t.end() || !content->is_string() || content->get_ref<const std::string&>().empty()) {
            impl.fail(where + ": content is missing, not a string, or empty");
        }
        auto id_it = t.find("id");
        if (id_it == t.end()) impl.fail(where + ": id is missing");
        std::int32_t id = parse_id(impl, *id_it, where);
        for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
            if (t.value(flag, false)) {
                impl.fail(where + " (" + content->dump() + "): " + flag +
                          "=true is not supported (Inkling's added tokens match exactly)");
            }
        }
        const std::string& text = content->get_ref<const std::string&>();
        if (!impl.added_by_content.emplace(text, id).second) {
            impl.fail(where + ": " + content->dump() + " is listed twice");
        }
        if (static_cast<std::size_t>(id) < impl.kind.size() && impl.kind[id] == 2) {
            impl.fail(where + ": id " + std::to_string(id) + " is used by two added tokens");
        }
        set_token(impl, id, text, 2);
        auto first = static_cast<unsigned char>(text[0]);
        impl.added_by_first[first].push_back({text, id});
        impl.added_first[first] = true;
        impl.any_added = true;
    }
    for (auto& list : impl.added_by_first) {
        std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
            return a.content.size() > b.content.size();
        });
    }
}

// The Split regex: the pre-tokenizer itself, or the one Split of a Sequence whose other
// members are ByteLevel steps that add nothing (no prefix space, no regex of their own).
std::string find_split_regex(const Tables& impl, const json& root) {
    auto it = root.find("pre_tokenizer");
    if (it == root.end() || it->is_null()) impl.fail("pre_tokenizer is missing (expected a Split regex)");
    std::vector<const json*> steps;
    if (it->value("type", "") == "Sequence") {
        auto list = it->find("pretokenizers");
        if (list == it->end() || !list->is_array()) impl.fail("pre_tokenizer Sequence has no pretokenizers list");
        for (const json& step : *list) steps.push_back(&step);
    } else {
        steps.push_back(&*it);
    }
    std::optional<std::string> pattern;
    for (const json* step : steps) {
        std::string type = step->is_object() ? step->value("type", "") : "";
        if (type == "Split") {
            if (pattern) impl.fail("pre_tokenizer has more than one Split (not supported)");
            auto p = step->find("pattern");
            if (p == step->end() || !p->is_object() || !p->contains("Regex") || !(*p)["Regex"].is_string()) {
                impl.fail("pre_tokenizer Split has no pattern.Regex string");
            }
            if (step->value("behavior", "") != "Isolated" || step->value("invert", false)) {
                impl.fail("pre_tokenizer Split must have behavior Isolated and invert false");
            }
            pattern = (*p)["Regex"].get<std::string>();
        } else if (type == "ByteLevel") {
            if (step->value("add_prefix_space", false) || step->value("use_regex", true)) {
                impl.fail("pre_tokenizer ByteLevel with add_prefix_space or use_regex is not supported");
            }
        } else {
            impl.fail("pre_tokenizer step of type " + json(type).dump() + " is not supported");
        }
    }
    if (!pattern) impl.fail("pre_tokenizer has no Split regex");
    return *pattern;
}

void compile_regex(Tables& impl, const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error,
                                     &error_offset, nullptr);
    if (code == nullptr) {
        impl.fail("pre_tokenizer regex does not compile at offset " + std::to_string(error_offset) +
                  ": " + pcre2_message(error));
    }
    impl.regex.reset(code);
    impl.match_context.reset(pcre2_match_context_create(nullptr));
    if (!impl.match_context) throw std::bad_alloc();
    pcre2_set_match_limit(impl.match_context.get(), std::numeric_limits<std::uint32_t>::max());
    // JIT is an optimisation only: where it is unavailable the interpreter runs.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
}

}  // namespace tokenizer_detail

using namespace tokenizer_detail;

struct Tokenizer::Impl : Tables {};

Tokenizer Tokenizer::parse(std::string_view json_text, const std::string& origin) {
    auto impl = std::make_shared<Impl>();
    impl->origin = origin;
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {
        impl->fail(std::string("not valid JSON: ") + e.what());
    }
    try {
        if (!root.is_object()) impl->fail("not a JSON object");
        if (auto n = root.find("normalizer"); n != root.end() && !n->is_null()) {
            impl->fail("a normalizer is not supported (Inkling's tokenizer has none)");
        }
        auto model = root.find("model");
        if (model == root.end() || !model->is_object()) impl->fail("model is missing or not an object");
        if (auto type = model->value("type", "BPE"); type != "BPE") {
            impl->fail("model.type is " + json(type).dump() + ", expected \"BPE\"");
        }
        for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
            auto a = model->find(affix);
            if (a != model->end() && !a->is_null() && !(a->is_string() && a->get_ref<const std::string&>().empty())) {
                impl->fail(std::string("model.") + affix + " is not supported");
            }
        }
        load_vocab(*impl, *model);
        load_merges(*impl, *model);
        load_added(*impl, root);
        compile_regex(*impl, find_split_regex(*impl, root));
    } catch (const json::exception& e) {
        impl->fail(std::string("unexpected JSON structure: ") + e.what());
    }
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
    std::ifstream in(tokenizer_json, std::ios::binary);
    if (!in) throw std::runtime_error(tokenizer_json.string() + ": cannot open");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw std::runtime_error(tokenizer_json.string() + ": read error");
    return parse(text, tokenizer_json.string());
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
    const Impl& impl = *impl_;
    std::vector<std::int32_t> out;
    out.reserve(text.size() / 3 + 4);
    Scratch scratch;
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
        pcre2_match_data_create_from_pattern(impl.regex.get(), nullptr));
    if (!md) throw std::bad_alloc();
    std::size_t segment = 0;
    while (auto hit = impl.next_added(text, segment)) {
        auto [at, added] = *hit;
        impl.encode_ordinary(text.substr(segment, at - segment), out, scratch, md.get());
        out.push_back(added->id);
        segment = at + added->content.size();
    }
    impl.encode_ordinary(text.substr(segment), out, scratch, md.get());
    return out;
}

const std::string& Tokenizer::token_bytes(std::int32_t id) const {
    const Impl& impl = *impl_;
    if (id < 0 || static_cast<std::size_t>(id) >= impl.kind.size() || impl.kind[id] == 0) {
        throw std::out_of_range("token id " + std::to_string(id) + " is not in the tokenizer (" +
                                impl.origin + ", vocab size " + std::to_string(impl.kind.size()) + ")");
    }
    return impl.bytes[id];
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
    std::string out;
    for (std::int32_t id : ids) out += token_bytes(id);
    return out;
}

std::optional<std::int32_t> Tokenizer::find(std::string_view token_text) const {
    const Impl& impl = *impl_;
    if (auto it = impl.added_by_content.find(std::string(token_text)); it != impl.added_by_content.end()) {
        return it->second;
    }
    auto raw = byte_level_decode(token_text);
    if (!raw) return std::nullopt;
    std::int32_t id = impl.vocab.find(*raw);
    return id < 0 ? std::nullopt : std::optional<std::int32_t>(id);
}

bool Tokenizer::is_added(std::int32_t id) const {
    const Impl& impl = *impl_;
    return id >= 0 && static_cast<std::size_t>(id) < impl.kind.size() && impl.kind[id] == 2;
}

std::size_t Tokenizer::vocab_size() const { return impl_->kind.size(); }

bool Tokenizer::has(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < impl_->kind.size() && impl_->kind[id] != 0;
}

}  // namespace inkling::model
