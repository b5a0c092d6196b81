#include "protocol/text/output_splitter.h"

#include "protocol/text/utf8_release.h"

namespace inkling::protocol::text {

bool is_marker(const std::string& t) {
    if (t.size() < 5 || t.compare(0, 2, "<|") != 0 || t.compare(t.size() - 2, 2, "|>") != 0) return false;
    for (std::size_t i = 2; i + 2 < t.size(); ++i) {
        char c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

OutputSplitter::Out OutputSplitter::feed(const std::string& token) {
    Out out;
    if (is_marker(token)) {
        // A channel switch: release what belongs to the old channel first.
        std::string rest = take_utf8(pending_, true);
        (reasoning_ ? out.reasoning : out.content) += rest;
        if (token == "<|content_thinking|>") reasoning_ = true;
        else if (token == "<|content_text|>") reasoning_ = false;
        return out;
    }
    pending_ += token;
    (reasoning_ ? out.reasoning : out.content) = take_utf8(pending_, false);
    return out;
}

OutputSplitter::Out OutputSplitter::flush() {
    Out out;
    (reasoning_ ? out.reasoning : out.content) = take_utf8(pending_, true);
    return out;
}

}  // namespace inkling::protocol::text
