#include "gateway/output_splitter.h"

namespace inkling::gateway {

bool is_marker(const std::string& t) {
    if (t.size() < 5 || t.compare(0, 2, "<|") != 0 || t.compare(t.size() - 2, 2, "|>") != 0) return false;
    for (std::size_t i = 2; i + 2 < t.size(); ++i) {
        char c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

namespace {
// Length of the UTF-8 sequence a lead byte starts, 0 if it cannot start one.
std::size_t sequence_length(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}
bool continuation(unsigned char b) { return (b & 0xC0) == 0x80; }
}  // namespace

// Moves the complete UTF-8 characters of pending_ out; invalid bytes become U+FFFD. An
// incomplete sequence at the end stays unless `final`.
std::string OutputSplitter::take_utf8(bool final) {
    std::string out;
    std::size_t i = 0;
    while (i < pending_.size()) {
        const auto b = static_cast<unsigned char>(pending_[i]);
        const std::size_t n = sequence_length(b);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        if (i + n > pending_.size()) {
            // Incomplete: wait for more bytes, unless what is there is already invalid.
            bool ok = true;
            for (std::size_t j = i + 1; j < pending_.size(); ++j) ok = ok && continuation(static_cast<unsigned char>(pending_[j]));
            if (ok && !final) break;
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        bool ok = true;
        for (std::size_t j = 1; j < n; ++j) ok = ok && continuation(static_cast<unsigned char>(pending_[i + j]));
        // Overlongs and surrogates: E0 needs A0.., ED at most 9F, F0 needs 90.., F4 at most 8F.
        const auto b1 = n > 1 ? static_cast<unsigned char>(pending_[i + 1]) : 0;
        if (ok && ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 > 0x9F) || (b == 0xF0 && b1 < 0x90) ||
                   (b == 0xF4 && b1 > 0x8F)))
            ok = false;
        if (!ok) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        out.append(pending_, i, n);
        i += n;
    }
    pending_.erase(0, i);
    return out;
}

OutputSplitter::Out OutputSplitter::feed(const std::string& token) {
    Out out;
    if (is_marker(token)) {
        // A channel switch: release what belongs to the old channel first.
        std::string rest = take_utf8(true);
        (reasoning_ ? out.reasoning : out.content) += rest;
        if (token == "<|content_thinking|>") reasoning_ = true;
        else if (token == "<|content_text|>") reasoning_ = false;
        return out;
    }
    pending_ += token;
    (reasoning_ ? out.reasoning : out.content) = take_utf8(false);
    return out;
}

OutputSplitter::Out OutputSplitter::flush() {
    Out out;
    (reasoning_ ? out.reasoning : out.content) = take_utf8(true);
    return out;
}

}  // namespace inkling::gateway
