// The TMLv0 chat renderer: messages → the prompt text an Inkling engine tokenizes.
// Gateway and coli both render with this, so a conversation's turns are byte prefixes
// of each other and the engine can reuse its KV prefix.
//
//   std::vector<tml::Message> chat{{tml::Role::User, {tml::Part::text("hi")}}};
//   std::string prompt = tml::render(chat, {.effort = 0.9});
//
// Markers are written as text; the engine's tokenizer matches them as single ids. User
// text that itself contains a marker string would be read as that marker (a property of
// every text-level TMLv0 renderer): callers that need literal markers must send ids.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inkling::protocol::tml {

namespace marker {
inline constexpr std::string_view kMessageUser = "<|message_user|>";
inline constexpr std::string_view kMessageModel = "<|message_model|>";
inline constexpr std::string_view kMessageSystem = "<|message_system|>";
inline constexpr std::string_view kMessageTool = "<|message_tool|>";
inline constexpr std::string_view kContentText = "<|content_text|>";
inline constexpr std::string_view kContentThinking = "<|content_thinking|>";
inline constexpr std::string_view kContentAudioInput = "<|content_audio_input|>";
inline constexpr std::string_view kContentXml = "<|content_xml|>";
inline constexpr std::string_view kContentInvokeToolJson = "<|content_invoke_tool_json|>";
inline constexpr std::string_view kAudio = "<|audio|>";
inline constexpr std::string_view kAudioEnd = "<|audio_end|>";
inline constexpr std::string_view kEndMessage = "<|end_message|>";
inline constexpr std::string_view kEndSampling = "<|content_model_end_sampling|>";
}  // namespace marker

enum class Role { System, Developer, User, Assistant, Tool };

struct Part {
    enum class Kind { Text, Thinking, Audio, ToolCall };
    Kind kind = Kind::Text;
    std::string text;               // Text, Thinking; ToolCall: the JSON envelope
    std::size_t audio_frames = 0;   // Audio: one <|audio|> per DMel frame (50 ms)
    std::string name = {};          // ToolCall: the function, the call message's author

    static Part text_part(std::string t) { return {Kind::Text, std::move(t), 0, {}}; }
    static Part thinking(std::string t) { return {Kind::Thinking, std::move(t), 0, {}}; }
    static Part audio(std::size_t frames) { return {Kind::Audio, {}, frames, {}}; }
    // An assistant's call (docs/model.md, "Tools"): `envelope` is {"name":<json string>,
    // "args":<canonical object>} exactly as it is to be rendered (tool_call_envelope builds
    // it).
    static Part tool_call(std::string function, std::string envelope) {
        return {Kind::ToolCall, std::move(envelope), 0, std::move(function)};
    }
};

struct Message {
    Role role = Role::User;
    std::vector<Part> parts;
    std::string name;  // author (tool name), plain text between role and content markers
};

struct RenderOptions {
    double effort = 0.0;               // "Thinking effort level: X"; 0 forces content mode
    bool add_generation_prompt = true; // end with <|message_model|>; false leaves a final
                                       // assistant message open for continuation
    // The tool declarations as one canonical JSON array (docs/model.md, "Tools": each spec
    // with exactly the keys description, name, parameters, type; keys sorted, no spaces),
    // rendered as the first message:
    // <|message_system|>tool_declare<|content_xml|>[…]<|end_message|>.
    // Empty: no tools. With tools the generation prompt stays a bare <|message_model|>
    // even at effort 0, so the model may open a call instead of text.
    std::string tools = {};
};

// The named thinking-effort levels (docs/model.md, "Thinking effort"): the one table
// behind `inkling run --effort`, coli's --effort and the gateway's reasoning_effort.
// `xhigh` is the OpenAI API's spelling of `max` (vLLM accepts both).
struct EffortLevel {
    std::string_view name;
    double effort;
};
inline constexpr std::array<EffortLevel, 7> kEffortLevels{{
    {"none", 0.0},
    {"minimal", 0.1},
    {"low", 0.2},
    {"medium", 0.7},
    {"high", 0.9},
    {"max", 0.99},
    {"xhigh", 0.99},
}};
// The effort of a level's name; nullopt for a name not in the table.
std::optional<double> effort_for_level(std::string_view level);
// The first level with exactly this effort (0.99 is `max`); nullopt for an unnamed effort.
std::optional<std::string_view> level_for_effort(double effort);
// "none, minimal, low, medium, high, max, xhigh", for help texts and error messages.
std::string effort_level_names();
// The effort as the system line writes it: "0", "0.1", …, "0.99".
std::string format_effort(double effort);

// Throws std::invalid_argument for parts a role cannot carry (thinking outside an
// assistant message, audio outside a user message) and for an effort outside [0, 1].
std::string render(const std::vector<Message>& messages, const RenderOptions& options);

}  // namespace inkling::protocol::tml
