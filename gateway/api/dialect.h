// An API dialect: how one HTTP API (OpenAI chat, OpenAI completions, the Anthropic Messages
// API) reads its request body and writes the answer. The generation itself (admission, the
// engine, stop sequences, the reasoning/content split) knows no dialect:
// gateway/generation/generation_driver.h hands a dialect's Formatter the text pieces, the
// finish reason and the usage, and the formatter writes either one JSON body or the SSE
// events.
//
//   auto f = chat_dialect().make(request, {id, created, model});
//   send(f->stream_start(usage));            // after the 200 head
//   send(f->stream_piece(Channel::Content, "Hel"));
//   send(f->stream_end(Finish::EndOfTurn, usage));   // or f->stream_error(error)
//   json body = f->body(answer);             // not streaming: the whole answer
//
// A new dialect is a Dialect value and a Formatter subclass in its own folder under
// gateway/api/ (as api/openai/dialect_chat.cpp); the handler table (gateway/http/routes.cpp)
// maps its path to it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/api/api_error.h"
#include "gateway/generation/channel.h"
#include "gateway/generation/generation_request.h"

namespace inkling::gateway {

// What every dialect's parser holds a request to.
struct GatewayLimits {
    std::vector<std::string> model_ids;   // the models served: a request's `model` must be one
    std::uint64_t max_tokens_cap = 4096;  // clamp for max_tokens (and the default)
    bool dmel_boost = true;               // the quiet-clip RMS boost (off = transformers exactly)
    std::size_t max_audio_seconds = 600;
};

// Why a generation ended, in no dialect's words.
enum class Finish {
    EndOfTurn,     // the model ended its message
    StopSequence,  // a `stop` sequence matched (the gateway sent STOP)
    Length,        // max_tokens or the context ran out
    ToolCalls,     // the model ended its turn having called tools (or the one call allowed)
};

// One call the model made (gateway/generation/tool_calls.h reads it out of the output).
struct ToolCall {
    std::size_t index = 0;  // in the turn: 0, 1, …
    std::string name;
    std::string arguments;  // the arguments' JSON text, as the model wrote it
};

// One generated token's log-probs (GenerationRequest::logprobs), of the answer's tokens only
// (not reasoning, markers or calls), as the engine computed them (the full distribution).
struct TokenLogprob {
    struct Alternative {
        std::string bytes;
        double logprob = 0.0;
    };
    std::string bytes;  // the token's bytes: part of a UTF-8 character, at times
    double logprob = 0.0;
    std::vector<Alternative> top;  // the most likely tokens, most likely first
    std::size_t text_offset = 0;   // code points of the answer before this token
};

struct Usage {
    std::uint64_t prompt_tokens = 0;      // ACCEPT's count (audio frames included)
    std::uint64_t cached_tokens = 0;      // of those, served from the slot's prefix (ACCEPT reused=)
    std::uint64_t completion_tokens = 0;  // DONE's emitted
};

// A whole answer, collected for a non-streaming response: the pieces in order, neighbours of
// one channel merged into one block (a dialect with content blocks keeps the order; one with
// a single message field joins a channel's blocks).
struct Answer {
    struct Block {
        Channel channel = Channel::Content;
        std::string text;
        std::optional<ToolCall> call = std::nullopt;  // a tool call's block (channel and text unused)
    };
    std::vector<Block> blocks;
    std::vector<TokenLogprob> logprobs;  // the answer's tokens, when asked for
    Finish finish = Finish::EndOfTurn;
    Usage usage;

    void add(Channel channel, std::string_view text);
    std::string text(Channel channel) const;  // every block of one channel, joined
    void add_call(std::size_t index, std::string name);
    void add_arguments(std::size_t index, std::string_view fragment);
    std::vector<ToolCall> calls() const;  // in the order they were made
};

// What a response names besides the answer.
struct ResponseMeta {
    std::string id;            // chatcmpl-…, cmpl-…: also the x-request-id
    std::int64_t created = 0;  // Unix seconds
    std::string model;
};

class Formatter {
public:
    virtual ~Formatter() = default;
    // Streaming (text/event-stream, after the 200 head): each call returns the bytes to send
    // now, possibly none. start at ACCEPT; piece per text piece; end or error exactly once.
    virtual std::string stream_start(const Usage& usage) = 0;
    virtual std::string stream_piece(Channel channel, std::string_view text) = 0;
    virtual std::string stream_end(Finish finish, const Usage& usage) = 0;
    // The stream is committed (HTTP 200) and the generation failed: the dialect's error event
    // and its end of stream, so a client sees an explicit end, never a silent cut.
    virtual std::string stream_error(const ApiError& error) = 0;
    // Tool calls, streamed (only for a request whose tools were callable, ToolUse): a call's
    // start, its arguments' JSON text in fragments, its end. A dialect whose requests never
    // declare tools keeps these defaults, which throw std::logic_error.
    virtual std::string stream_call_start(std::size_t index, std::string_view name);
    virtual std::string stream_call_arguments(std::size_t index, std::string_view fragment);
    virtual std::string stream_call_end(std::size_t index);
    // Streamed log-probs (GenerationRequest::logprobs): the tokens whose text the next
    // Content piece completes, given just before it (or before stream_end, at the end).
    // Default: ignored, for a dialect that has no log-probs.
    virtual void token_logprobs(std::vector<TokenLogprob> tokens) { (void)tokens; }
    // Not streaming: the response body for a complete answer.
    virtual nlohmann::json body(const Answer& answer) const = 0;
    // The stop sequence that ended the answer, before stream_end or body (Finish::StopSequence):
    // for a dialect that names it (the Messages API's stop_sequence).
    virtual void stop_matched(std::string_view sequence) { (void)sequence; }
};

struct Dialect {
    const char* endpoint;      // the metrics label ("chat", "completions")
    const char* id_prefix;     // of ResponseMeta::id
    const char* prompt_param;  // the field a refused prompt is blamed on
    // The output is a TMLv0 message (reasoning and answer channels, markers dropped); false:
    // raw text, passed through as it comes.
    bool message_output;
    GenerationRequest (*parse)(const nlohmann::json& body, const GatewayLimits& limits);
    std::unique_ptr<Formatter> (*make)(const GenerationRequest& request, ResponseMeta meta);
    // Any error on this dialect's routes (before the response is committed) as its body.
    nlohmann::json (*error_body)(const ApiError& error);
    // Its HTTP status, where the dialect says it otherwise (the Messages API's 529 for an
    // overloaded server); nullptr: the error's own.
    int (*error_status)(const ApiError& error) = nullptr;
};

// The status an error is answered with on `dialect`'s routes.
inline int status_of(const Dialect& dialect, const ApiError& error) {
    return dialect.error_status ? dialect.error_status(error) : error.status;
}

}  // namespace inkling::gateway
