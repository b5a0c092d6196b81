#include "gateway/generation/tool_calls.h"

#include <nlohmann/json.hpp>

#include "protocol/text/utf8_release.h"

namespace inkling::gateway {
namespace {

constexpr std::size_t kMaxMarker = 48;  // the longest TMLv0 marker is 30 bytes

bool marker_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }
// A function name's bytes (OpenAI: a-zA-Z0-9_-; `.` and `:` for namespaced tools).
bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == ':';
}
bool space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

enum class Held { Viable, Complete, Dead };
// Whether `h` (starting with '<') is a prefix of `<|[a-z0-9_]+|>`, all of one, or neither.
Held marker_state(const std::string& h) {
    if (h.size() > kMaxMarker) return Held::Dead;
    if (h.size() >= 2 && h[1] != '|') return Held::Dead;
    for (std::size_t i = 2; i < h.size(); ++i) {
        if (marker_char(h[i])) continue;
        if (h[i] != '|' || i == 2) return Held::Dead;
        if (i + 1 == h.size()) return Held::Viable;  // "<|name|", the '>' may follow
        return i + 2 == h.size() && h[i + 1] == '>' ? Held::Complete : Held::Dead;
    }
    return Held::Viable;
}

}  // namespace

ToolCallParser::ToolCallParser(Options options)
    : options_(options), state_(options.calls ? State::Header : State::Text), channel_(options.start) {}

void ToolCallParser::feed(std::string_view bytes, std::vector<Event>& out) {
    first_new_ = out.size();
    for (char b : bytes) byte(b, out);
    flush_text(false, out);
    flush_arguments(false, out);
}

void ToolCallParser::finish(std::vector<Event>& out) {
    first_new_ = out.size();
    // Held bytes that never became a marker are data.
    std::string held = std::move(held_);
    held_.clear();
    for (char b : held) data(b, out);
    if (state_ == State::Call) end_call(out);
    release_header();
    flush_text(true, out);
}

void ToolCallParser::byte(char b, std::vector<Event>& out) {
    if (held_.empty() && b != '<') return data(b, out);
    held_ += b;
    switch (marker_state(held_)) {
    case Held::Viable: return;
    case Held::Complete: {
        const std::string m = std::move(held_);
        held_.clear();
        return marker(m, out);
    }
    case Held::Dead: break;
    }
    // Not a marker: its '<' is data, and the rest is scanned again (it may start one).
    const std::string rest = held_.substr(1);
    held_.clear();
    data('<', out);
    for (char c : rest) byte(c, out);
}

void ToolCallParser::data(char b, std::vector<Event>& out) {
    switch (state_) {
    case State::Header:
        if (name_char(b) && header_.size() < kMaxName) {
            header_ += b;
            return;
        }
        release_header();
        text_ += b;
        return;
    case State::Text: text_ += b; return;
    case State::Call: envelope_byte(b, out); return;
    }
}

void ToolCallParser::release_header() {
    if (state_ != State::Header) return;
    state_ = State::Text;
    text_ += header_;
    header_.clear();
}

void ToolCallParser::marker(const std::string& m, std::vector<Event>& out) {
    const bool invoke = options_.calls && m == "<|content_invoke_tool_json|>";
    std::string name;
    if (state_ == State::Header && invoke) {
        name = std::move(header_);
        header_.clear();
        state_ = State::Text;
    }
    release_header();  // an author that named no call: text of the channel it ends
    flush_text(true, out);
    if (state_ == State::Call) end_call(out);
    if (invoke) return start_call(std::move(name), out);
    if (m == "<|content_thinking|>") channel_ = Channel::Reasoning;
    else if (m == "<|content_text|>") channel_ = Channel::Content;
    else if (m == "<|message_model|>" && options_.calls) state_ = State::Header;
}

void ToolCallParser::start_call(std::string name, std::vector<Event>& out) {
    state_ = State::Call;
    env_ = Envelope{};
    named_ = false;
    any_args_ = false;
    unnamed_.clear();
    args_.clear();
    ++calls_;
    if (!name.empty()) {
        out.push_back({Event::Kind::CallStart, Channel::Content, calls_ - 1, std::move(name)});
        named_ = true;
    }
}

void ToolCallParser::end_call(std::vector<Event>& out) {
    if (!named_) {
        // No author before the marker: the envelope's name, read whole (escapes and all).
        std::string name;
        if (!env_.name_json.empty()) {
            const auto j = nlohmann::json::parse(env_.name_json, nullptr, false);
            if (j.is_string()) name = j.get<std::string>();
        }
        out.push_back({Event::Kind::CallStart, Channel::Content, calls_ - 1, std::move(name)});
        named_ = true;
        args_ = std::move(unnamed_) + args_;
        unnamed_.clear();
    }
    if (!any_args_) args_ = "{}";  // the envelope gave no arguments: the function takes none
    any_args_ = true;
    flush_arguments(true, out);
    out.push_back({Event::Kind::CallEnd, Channel::Content, calls_ - 1, {}});
    state_ = State::Text;
}

void ToolCallParser::envelope_byte(char b, std::vector<Event>& out) {
    using At = Envelope::At;
    Envelope& e = env_;
    switch (e.at) {
    case At::Start:
        if (space(b)) return;
        e.at = b == '{' ? At::KeyOrEnd : At::Bad;
        return;
    case At::KeyOrEnd:
        if (space(b) || b == ',') return;
        if (b == '"') {
            e.at = At::Key;
            e.key.clear();
        } else {
            e.at = b == '}' ? At::Done : At::Bad;
        }
        return;
    case At::Key:
        if (e.escaped) e.escaped = false;
        else if (b == '\\') e.escaped = true;
        else if (b == '"') {
            e.at = At::Colon;
            return;
        }
        e.key += b;
        return;
    case At::Colon:
        if (space(b)) return;
        if (b != ':') {
            e.at = At::Bad;
            return;
        }
        e.at = At::Value;
        e.started = e.in_string = e.escaped = e.scalar = false;
        e.depth = 0;
        e.target = e.key == "args" && !e.saw_args ? Envelope::Target::Args
                   : e.key == "name" && e.name_json.empty() ? Envelope::Target::Name
                                                            : Envelope::Target::Skip;
        if (e.target == Envelope::Target::Args) e.saw_args = true;
        return;
    case At::Value: return value_byte(b, out);
    case At::AfterValue:
        if (space(b)) return;
        e.at = b == ',' ? At::KeyOrEnd : b == '}' ? At::Done : At::Bad;
        return;
    case At::Done:
    case At::Bad: return;  // trailing bytes of the message: not part of the call
    }
}

void ToolCallParser::value_byte(char b, std::vector<Event>& out) {
    Envelope& e = env_;
    if (!e.started) {
        if (space(b)) return;
        e.started = true;
        if (b == '{' || b == '[') e.depth = 1;
        else if (b == '"') e.in_string = true;
        else e.scalar = true;
        return to_value(b, out);
    }
    if (e.scalar) {
        if (space(b) || b == ',' || b == '}' || b == ']') {
            // The number (or literal) ended before this byte, which belongs to the envelope.
            e.at = Envelope::At::AfterValue;
            return envelope_byte(b, out);
        }
        return to_value(b, out);
    }
    to_value(b, out);
    if (e.in_string) {
        if (e.escaped) e.escaped = false;
        else if (b == '\\') e.escaped = true;
        else if (b == '"') {
            e.in_string = false;
            if (e.depth == 0) e.at = Envelope::At::AfterValue;
        }
        return;
    }
    if (b == '"') e.in_string = true;
    else if (b == '{' || b == '[') ++e.depth;
    else if ((b == '}' || b == ']') && --e.depth == 0) e.at = Envelope::At::AfterValue;
}

void ToolCallParser::to_value(char b, std::vector<Event>& out) {
    Envelope& e = env_;
    switch (e.target) {
    case Envelope::Target::Skip: return;
    case Envelope::Target::Name:
        e.name_json += b;
        // The name is whole at its closing quote: a call without an author starts now.
        if (!named_ && e.name_json.size() > 1 && b == '"' && !e.escaped) {
            const auto j = nlohmann::json::parse(e.name_json, nullptr, false);
            if (j.is_string()) {
                out.push_back({Event::Kind::CallStart, Channel::Content, calls_ - 1, j.get<std::string>()});
                named_ = true;
                args_ = std::move(unnamed_);
                unnamed_.clear();
            }
        }
        return;
    case Envelope::Target::Args:
        any_args_ = true;
        (named_ ? args_ : unnamed_) += b;
        return;
    }
}

void ToolCallParser::flush_text(bool final, std::vector<Event>& out) {
    std::string t = protocol::text::take_utf8(text_, final);
    if (t.empty()) return;
    if (out.size() > first_new_ && out.back().kind == Event::Kind::Text && out.back().channel == channel_) out.back().text += t;
    else out.push_back({Event::Kind::Text, channel_, 0, std::move(t)});
}

void ToolCallParser::flush_arguments(bool final, std::vector<Event>& out) {
    if (!named_ || args_.empty()) return;
    std::string t = protocol::text::take_utf8(args_, final);
    if (t.empty()) return;
    out.push_back({Event::Kind::CallArguments, Channel::Content, calls_ - 1, std::move(t)});
}

}  // namespace inkling::gateway
