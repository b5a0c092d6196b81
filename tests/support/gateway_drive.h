// Test helpers for the dialects and the generation driver: run a scripted generation (the
// engine's token bytes, its DONE) through GenerationDriver and a real dialect's Formatter,
// streaming or not, and read an OpenAI SSE stream back into one answer.
#pragma once

#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "gateway/api/dialect.h"
#include "gateway/generation/generation_driver.h"

namespace inkling::gateway::test {

struct Script {
    std::vector<std::string> tokens;  // DATA payloads, in order
    std::vector<protocol::TokenLogprobs> logprobs = {};  // each DATA's tail (empty: none)
    std::uint64_t prompt_tokens = 7, reused = 3;
    bool length_limited = false;
};

struct Run {
    std::string bytes;               // streaming: everything sent after the HTTP head
    nlohmann::json body;             // not streaming: the 200 body
    std::vector<std::size_t> stops;  // token indexes after which the driver asked for STOP
    Finish finish = Finish::EndOfTurn;
};

inline Run drive(const Dialect& dialect, const GenerationRequest& g, const Script& s) {
    auto f = dialect.make(g, {"id-1", 1700000000, "m"});
    GenerationDriver d(*f, driver_options(g, dialect.message_output));
    Run run;
    run.bytes = d.accepted({"g1", s.prompt_tokens, s.reused});
    for (std::size_t i = 0; i < s.tokens.size(); ++i) {
        auto step = d.data(s.tokens[i], i < s.logprobs.size() ? std::optional(s.logprobs[i]) : std::nullopt);
        run.bytes += step.bytes;
        if (step.stop_engine) run.stops.push_back(i);
    }
    protocol::DoneStats stat;
    stat.emitted = s.tokens.size();
    stat.length_limited = s.length_limited;
    auto end = d.done(stat);
    CHECK(end.complete);
    CHECK(!end.error);
    run.bytes += end.bytes;
    run.body = end.body;
    run.finish = d.finish();
    if (!g.stream) CHECK(run.bytes.empty());
    return run;
}

// An OpenAI SSE stream: every `data:` event's JSON in order, then whether [DONE] ended it.
struct Events {
    std::vector<nlohmann::json> events;
    bool done = false;
    std::string trailing;  // bytes after [DONE] (must be none)
};

// The SSE event at `at`, without its blank line; `at` moves past it.
inline std::string next_sse_event(const std::string& bytes, std::size_t& at) {
    const std::size_t end = bytes.find("\n\n", at);
    REQUIRE_MESSAGE(end != std::string::npos, "an SSE event without its blank line: " << bytes.substr(at));
    std::string event = bytes.substr(at, end - at);
    at = end + 2;
    return event;
}

inline Events parse_sse(const std::string& bytes) {
    Events out;
    std::size_t at = 0;
    while (at < bytes.size()) {
        const std::string event = next_sse_event(bytes, at);
        REQUIRE_MESSAGE(event.starts_with("data: "), "not a data event: " << event);
        const std::string data = event.substr(6);
        if (data == "[DONE]") {
            out.done = true;
            out.trailing = bytes.substr(at);
            break;
        }
        out.events.push_back(nlohmann::json::parse(data));
    }
    return out;
}

// A streamed OpenAI answer put together as a client does: the text of each channel, the
// finish reason, the usage chunk.
struct Assembled {
    std::string content, reasoning, finish_reason;
    nlohmann::json usage;  // null when no usage chunk came
    int finishes = 0;      // chunks that carried a finish reason
};

inline Assembled assemble(const Events& e, bool chat) {
    Assembled a;
    for (const auto& j : e.events) {
        if (j.contains("usage")) {
            CHECK(j["choices"].empty());
            a.usage = j["usage"];
            continue;
        }
        REQUIRE(j["choices"].size() == 1);
        const auto& choice = j["choices"][0];
        CHECK(choice["index"] == 0);
        if (chat) {
            const auto& delta = choice["delta"];
            if (delta.contains("content")) a.content += delta["content"].get<std::string>();
            if (delta.contains("reasoning_content")) a.reasoning += delta["reasoning_content"].get<std::string>();
        } else {
            a.content += choice["text"].get<std::string>();
            CHECK(choice["logprobs"].is_null());
        }
        if (!choice["finish_reason"].is_null()) {
            a.finish_reason = choice["finish_reason"];
            ++a.finishes;
        }
    }
    return a;
}

}  // namespace inkling::gateway::test
