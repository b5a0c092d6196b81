// What the two OpenAI dialects (dialect_chat.cpp, dialect_completions.cpp) share: SSE
// `data:` framing and the `[DONE]` marker, the chunk and body envelopes, finish reasons,
// usage, and errors — {"error": {...}} as a body, and mid-stream as a `data:` event followed
// by `[DONE]` (what the openai SDKs raise as an APIError).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/api/dialect.h"

namespace inkling::gateway {

// JSON text as the gateway sends it: compact, invalid UTF-8 replaced by U+FFFD.
std::string dump_json(const nlohmann::json& j);
// One SSE event without a name: "data: <json>\n\n".
std::string sse_data(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

const char* openai_finish_reason(Finish finish);  // "stop", "length", "tool_calls"
// A token's text as OpenAI's log-probs name it: the bytes when they are valid UTF-8, else
// "bytes:\xNN…" (a token holding part of a character).
std::string openai_token_text(const std::string& bytes);
// A log-prob as JSON can carry it: -9999 for an impossible token (OpenAI's marker of one).
double openai_logprob(double logprob);
// The bytes as an array of numbers (the `bytes` fields).
nlohmann::json byte_array(const std::string& bytes);
nlohmann::json openai_usage(const Usage& usage);  // prompt_tokens, completion_tokens, total_tokens
nlohmann::json openai_error_body(const ApiError& error);

// The streaming and body plumbing of an OpenAI response; subclasses shape the choices.
class OpenAiFormatter : public Formatter {
public:
    std::string stream_error(const ApiError& error) override;

protected:
    OpenAiFormatter(ResponseMeta meta, const char* chunk_object, bool include_usage)
        : meta_(std::move(meta)), chunk_object_(chunk_object), include_usage_(include_usage) {}
    // data: {"id", "object": chunk_object, "created", "model", "choices": [choice]}
    std::string chunk(nlohmann::json choice) const;
    // The last chunk (its choice carries the finish reason), the usage chunk when
    // stream_options.include_usage asked for it, and [DONE].
    std::string finish_stream(nlohmann::json last_choice, const Usage& usage) const;
    // {"id", "object", "created", "model", "usage", "choices": [choice]}
    nlohmann::json whole(const char* object, nlohmann::json choice, const Usage& usage) const;
    const ResponseMeta& meta() const { return meta_; }

private:
    ResponseMeta meta_;
    const char* chunk_object_;
    bool include_usage_;
};

}  // namespace inkling::gateway
