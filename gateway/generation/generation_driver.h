// One generation from the engine's ACCEPT to its end, in no API dialect's terms: the engine's
// token bytes go through the reasoning/content split (TMLv0 message output) and the stop
// filter, and the pieces, the finish reason and the usage go to the dialect's Formatter,
// which writes SSE events (streaming) or one body at the end. No I/O: the caller
// (Server::generate) reads the engine, writes the socket and keeps the deadlines; this
// decides what to say.
//
//   GenerationDriver d(*formatter, {.stream = true, .message_output = true, .stop = {"END"}});
//   send(d.accepted(accept));
//   auto step = d.data(frame.bytes);   send(step.bytes);   if (step.stop_engine) engine.stop(id);
//   auto end = d.done(done.stat);      // or d.failed(error)
//   send(end.bytes)                    // streaming; otherwise end.body / end.error
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/api/api_error.h"
#include "gateway/api/dialect.h"
#include "gateway/generation/logprob_aligner.h"
#include "gateway/generation/stop_filter.h"
#include "gateway/generation/tool_calls.h"
#include "protocol/frames.h"

namespace inkling::gateway {

struct DriverOptions {
    bool stream = false;
    bool message_output = true;    // Dialect::message_output
    bool start_in_content = true;  // GenerationRequest::start_in_content
    std::vector<std::string> stop;
    bool calls = false;            // ToolUse::callable(): the output may hold tool calls
    bool parallel_calls = true;    // ToolUse::parallel; false: STOP after the first call
    // GenerationRequest::logprobs: log-probs of the answer's tokens with this many
    // alternatives (the DATA frames must carry a tail: SUBMIT data_logprobs).
    std::optional<std::uint32_t> logprobs = std::nullopt;
};

// DriverOptions for a request on a dialect: the one place GenerationRequest maps onto them.
DriverOptions driver_options(const GenerationRequest& request, bool message_output);

class GenerationDriver {
public:
    GenerationDriver(Formatter& formatter, DriverOptions options);

    // ACCEPT: the request runs. The stream's opening bytes ("" when not streaming).
    std::string accepted(const protocol::Accept& accept);

    struct Step {
        std::string bytes;         // to send now (streaming)
        bool stop_engine = false;  // a stop sequence matched just now: STOP the request
    };
    // One DATA frame: its bytes and, with logprobs, its tail. After a stop sequence matched
    // (or the one call allowed ended), whatever is still in flight is dropped.
    Step data(const std::string& token_bytes, const std::optional<protocol::TokenLogprobs>& logprobs = std::nullopt);

    struct End {
        bool complete = false;          // DONE: the whole answer (else the generation failed)
        std::string bytes;              // streaming: the last events to send
        nlohmann::json body;            // not streaming and complete: the 200 body
        std::optional<ApiError> error;  // not streaming and failed: the error response
    };
    // DONE: what was held back, the finish reason, the usage.
    End done(const protocol::DoneStats& stat);
    // The generation broke after ACCEPT (an engine ERROR, its death, a deadline): an error
    // event and the end of the stream, or (nothing sent yet) the error response.
    End failed(const ApiError& error);

    bool stopped() const { return stops_.stopped(); }
    Finish finish() const { return answer_.finish; }  // after done()
    const Usage& usage() const { return answer_.usage; }

private:
    // The parser's events: reasoning as is, content through the stops, calls to the formatter.
    std::string route(std::vector<ToolCallParser::Event>& events);
    std::string content(const std::string& text);  // through the stop filter, with its log-probs
    std::string emit(Channel channel, const std::string& text);
    void release_logprobs(const std::string& passed);  // of the tokens whose text is out
    void stop_engine();

    Formatter& formatter_;
    DriverOptions options_;
    ToolCallParser parser_;
    StopFilter stops_;
    LogprobAligner logprobs_;
    Answer answer_;
    bool stop_sent_ = false, stop_now_ = false;
    bool calls_closed_ = false;  // the one call allowed (parallel_calls false) ended
};

// An engine ERROR before ACCEPT as the error a client should see (400 for a prompt the
// engine refuses, 429 while it is busy, 500 otherwise).
ApiError engine_refusal(const protocol::Error& error);
// CONTEXT_EXCEEDED's prompt_tokens=N (PROTOCOL.md §7.3: the one ERROR detail with a
// grammar): the engine's count of a prompt too long to serve; nullopt for any other error.
std::optional<std::uint64_t> context_exceeded_prompt_tokens(const protocol::Error& error);
// A generation that failed after ACCEPT: 503 server_error, Retry-After 1, the message
// "generation failed: <why>".
ApiError generation_failure(const std::string& why, const std::string& code = "engine_error");

}  // namespace inkling::gateway
