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

#include "gateway/api_error.h"
#include "gateway/dialect.h"
#include "gateway/output_splitter.h"
#include "gateway/stop_filter.h"
#include "protocol/frames.h"

namespace inkling::gateway {

struct DriverOptions {
    bool stream = false;
    bool message_output = true;    // Dialect::message_output
    bool start_in_content = true;  // GenerationRequest::start_in_content
    std::vector<std::string> stop;
};

class GenerationDriver {
public:
    GenerationDriver(Formatter& formatter, DriverOptions options);

    // ACCEPT: the request runs. The stream's opening bytes ("" when not streaming).
    std::string accepted(const protocol::Accept& accept);

    struct Step {
        std::string bytes;         // to send now (streaming)
        bool stop_engine = false;  // a stop sequence matched just now: STOP the request
    };
    // One DATA frame's bytes. After a stop sequence matched, whatever is still in flight is
    // dropped.
    Step data(const std::string& token_bytes);

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
    std::string route(const OutputSplitter::Out& out);  // reasoning as is, content through the stops
    std::string emit(Channel channel, const std::string& text);

    Formatter& formatter_;
    DriverOptions options_;
    OutputSplitter splitter_;
    StopFilter stops_;
    Answer answer_;
    bool stop_sent_ = false, stop_now_ = false;
};

// An engine ERROR before ACCEPT as the error a client should see (400 for a prompt the
// engine refuses, 429 while it is busy, 500 otherwise).
ApiError engine_refusal(const protocol::Error& error);
// A generation that failed after ACCEPT: 503 server_error, Retry-After 1, the message
// "generation failed: <why>".
ApiError generation_failure(const std::string& why, const std::string& code = "engine_error");

}  // namespace inkling::gateway
