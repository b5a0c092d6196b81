#include "protocol/tml_render.h"

#include <stdexcept>
#include <utility>

#include "protocol/fields.h"

namespace inkling::protocol::tml {
namespace {

bool is_system(Role r) { return r == Role::System || r == Role::Developer; }

std::string_view role_marker(Role r) {
    switch (r) {
    case Role::User: return marker::kMessageUser;
    case Role::Assistant: return marker::kMessageModel;
    case Role::Tool: return marker::kMessageTool;
    case Role::System:
    case Role::Developer: break;
    }
    return marker::kMessageSystem;
}

std::string effort_message(double effort) {
    std::string out;
    out += marker::kMessageSystem;
    out += marker::kContentText;
    out += "Thinking effort level: " + format_effort(effort);
    out += marker::kEndMessage;
    return out;
}

// One message per part (TMLv0 carries one content kind per message). `open` leaves the
// last block without its end marker, for continuing a final assistant message.
std::string render_message(const Message& m, bool open) {
    std::string out;
    std::size_t blocks = 0;
    // The last part that renders anything (empty text renders nothing).
    std::size_t last_written = m.parts.size();
    for (std::size_t i = m.parts.size(); i-- > 0;) {
        const Part& p = m.parts[i];
        if (p.kind == Part::Kind::Audio || p.kind == Part::Kind::ToolCall || !p.text.empty()) {
            last_written = i;
            break;
        }
    }
    for (std::size_t i = 0; i < m.parts.size(); ++i) {
        const Part& p = m.parts[i];
        std::string body;
        switch (p.kind) {
        case Part::Kind::Text:
            if (p.text.empty()) continue;
            body = std::string(marker::kContentText) + p.text;
            break;
        case Part::Kind::Thinking:
            if (m.role != Role::Assistant)
                throw std::invalid_argument("a thinking part belongs to an assistant message");
            if (p.text.empty()) continue;
            body = std::string(marker::kContentThinking) + p.text;
            break;
        case Part::Kind::ToolCall:
            if (m.role != Role::Assistant) throw std::invalid_argument("a tool call belongs to an assistant message");
            if (p.name.empty()) throw std::invalid_argument("a tool call needs its function's name");
            body = std::string(marker::kContentInvokeToolJson) + p.text;
            break;
        case Part::Kind::Audio:
            if (m.role != Role::User)
                throw std::invalid_argument("an audio part belongs to a user message");
            if (p.audio_frames == 0) throw std::invalid_argument("an audio part has no frames");
            body = std::string(marker::kContentAudioInput);
            body.reserve(body.size() + p.audio_frames * marker::kAudio.size() + 16);
            for (std::size_t f = 0; f < p.audio_frames; ++f) body += marker::kAudio;
            body += marker::kAudioEnd;
            break;
        }
        out += role_marker(m.role);
        out += p.kind == Part::Kind::ToolCall ? p.name : m.name;  // a call's author is its function
        out += body;
        ++blocks;
        if (!(open && i == last_written)) out += marker::kEndMessage;
    }
    if (m.role == Role::Assistant && blocks > 0 && !open) out += marker::kEndSampling;
    return out;
}

}  // namespace

std::optional<double> effort_for_level(std::string_view level) {
    for (const auto& l : kEffortLevels)
        if (l.name == level) return l.effort;
    return std::nullopt;
}

std::optional<std::string_view> level_for_effort(double effort) {
    for (const auto& l : kEffortLevels)
        if (l.effort == effort) return l.name;
    return std::nullopt;
}

std::string effort_level_names() {
    std::string out;
    for (const auto& l : kEffortLevels) out += (out.empty() ? "" : ", ") + std::string(l.name);
    return out;
}

std::string format_effort(double effort) {
    return effort == 0.0 ? std::string("0") : format_double(effort);
}

std::string render(const std::vector<Message>& messages, const RenderOptions& options) {
    if (!(options.effort >= 0.0 && options.effort <= 1.0))
        throw std::invalid_argument("effort must lie in [0, 1]");
    std::string out;
    if (!options.tools.empty()) {
        out += marker::kMessageSystem;
        out += "tool_declare";
        out += marker::kContentXml;
        out += options.tools;
        out += marker::kEndMessage;
    }
    bool effort_written = false;
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const Message& m = messages[i];
        if (!effort_written && !is_system(m.role)) {
            out += effort_message(options.effort);
            effort_written = true;
        }
        bool open = !options.add_generation_prompt && i + 1 == messages.size() &&
                    m.role == Role::Assistant;
        out += render_message(m, open);
    }
    if (!effort_written) out += effort_message(options.effort);
    if (options.add_generation_prompt) {
        out += marker::kMessageModel;
        if (options.effort == 0.0 && options.tools.empty()) out += marker::kContentText;
    }
    return out;
}

}  // namespace inkling::protocol::tml
