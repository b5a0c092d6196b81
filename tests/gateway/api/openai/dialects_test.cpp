// The OpenAI dialects' formatters (gateway/api/openai/dialect_chat.cpp,
// dialect_completions.cpp) driven by the generation driver: a streamed answer assembles
// into the same answer as the non-streaming body, finish reasons and usage in OpenAI's
// shapes, errors as error objects (a body, or a data event and [DONE] mid-stream).
#include <doctest/doctest.h>

#include "gateway/api/openai/dialect_chat.h"
#include "gateway/api/openai/dialect_completions.h"
#include "gateway/api/openai/openai_format.h"
#include "support/gateway_drive.h"

using namespace inkling::gateway;
using namespace inkling::gateway::test;
using nlohmann::json;

namespace {

GenerationRequest request(bool stream, bool include_usage = false) {
    GenerationRequest g;
    g.stream = stream;
    g.include_usage = include_usage;
    return g;
}

// A thinking model's turn: reasoning, the switch to the answer, a two-byte character split
// across tokens, a marker the client must never see.
const Script kThinking{{"Let me", " think.", "<|content_text|>", "Caf", "\xc3", "\xa9", " ok", "<|end_message|>"}};

}  // namespace

TEST_CASE("chat: the streamed deltas assemble into the non-streaming message, reasoning apart") {
    GenerationRequest g = request(false);
    g.start_in_content = false;  // the prompt left the model in its thinking channel
    const Run whole = drive(chat_dialect(), g, kThinking);
    g.stream = true;
    const Run streamed = drive(chat_dialect(), g, kThinking);

    const json& message = whole.body["choices"][0]["message"];
    CHECK(message["role"] == "assistant");
    CHECK(message["content"] == "Caf\xc3\xa9 ok");
    CHECK(message["reasoning_content"] == "Let me think.");

    const Events e = parse_sse(streamed.bytes);
    CHECK(e.done);
    CHECK(e.trailing.empty());
    const Assembled a = assemble(e, true);
    CHECK(a.content == message["content"]);
    CHECK(a.reasoning == message["reasoning_content"]);
    CHECK(a.finish_reason == whole.body["choices"][0]["finish_reason"]);
    CHECK(a.finishes == 1);
    // The first chunk gives the role (and an empty content), as OpenAI's stream does.
    REQUIRE(!e.events.empty());
    CHECK(e.events.front()["choices"][0]["delta"] == json({{"role", "assistant"}, {"content", ""}}));
    // The split character comes out once, whole (a half would have gone out as U+FFFD).
    int whole_char = 0;
    for (const auto& ev : e.events)
        if (ev["choices"][0]["delta"].value("content", "") == "\xc3\xa9") ++whole_char;
    CHECK(whole_char == 1);
}

TEST_CASE("chat: envelopes carry the id, created, model and object names") {
    const Run whole = drive(chat_dialect(), request(false), {{"Hi"}});
    CHECK(whole.body["id"] == "id-1");
    CHECK(whole.body["object"] == "chat.completion");
    CHECK(whole.body["created"] == 1700000000);
    CHECK(whole.body["model"] == "m");
    CHECK(whole.body["choices"][0]["logprobs"].is_null());
    CHECK(!whole.body["choices"][0]["message"].contains("reasoning_content"));  // no reasoning: no field
    const Events e = parse_sse(drive(chat_dialect(), request(true), {{"Hi"}}).bytes);
    for (const auto& ev : e.events) {
        CHECK(ev["id"] == "id-1");
        CHECK(ev["object"] == "chat.completion.chunk");
        CHECK(ev["created"] == 1700000000);
        CHECK(ev["model"] == "m");
    }
    CHECK(e.events.back()["choices"][0]["delta"] == json::object());  // the finish chunk
}

TEST_CASE("chat and completions: finish reasons stop and length, the driver's own three apart") {
    for (const Dialect* d : {&chat_dialect(), &completions_dialect()}) {
        CAPTURE(d->endpoint);
        const bool chat = d == &chat_dialect();
        Script ended{{"a", "b"}};
        Script cut{{"a", "b"}};
        cut.length_limited = true;
        GenerationRequest stopping = request(false);
        stopping.stop = {"b"};
        const Run r1 = drive(*d, request(false), ended), r2 = drive(*d, request(false), cut), r3 = drive(*d, stopping, ended);
        CHECK(r1.finish == Finish::EndOfTurn);
        CHECK(r2.finish == Finish::Length);
        CHECK(r3.finish == Finish::StopSequence);
        CHECK(r1.body["choices"][0]["finish_reason"] == "stop");
        CHECK(r2.body["choices"][0]["finish_reason"] == "length");
        CHECK(r3.body["choices"][0]["finish_reason"] == "stop");
        stopping.stream = true;
        CHECK(assemble(parse_sse(drive(*d, stopping, ended).bytes), chat).finish_reason == "stop");
        CHECK(assemble(parse_sse(drive(*d, request(true), cut).bytes), chat).finish_reason == "length");
    }
}

TEST_CASE("chat and completions: usage from ACCEPT and DONE; streamed only when include_usage asks") {
    for (const Dialect* d : {&chat_dialect(), &completions_dialect()}) {
        CAPTURE(d->endpoint);
        const bool chat = d == &chat_dialect();
        Script s{{"x", "y", "z"}};
        s.prompt_tokens = 11;
        s.reused = 4;
        const json usage = {{"prompt_tokens", 11}, {"completion_tokens", 3}, {"total_tokens", 14},
                            {"prompt_tokens_details", {{"cached_tokens", 4}}}};
        CHECK(drive(*d, request(false), s).body["usage"] == usage);
        CHECK(assemble(parse_sse(drive(*d, request(true, true), s).bytes), chat).usage == usage);
        CHECK(assemble(parse_sse(drive(*d, request(true, false), s).bytes), chat).usage.is_null());
        // The usage chunk comes after the finish chunk, just before [DONE].
        const Events e = parse_sse(drive(*d, request(true, true), s).bytes);
        REQUIRE(e.events.size() >= 2);
        CHECK(e.events.back().contains("usage"));
        CHECK(!e.events[e.events.size() - 2]["choices"][0]["finish_reason"].is_null());
    }
}

TEST_CASE("completions: raw text passes through, markers and all, and assembles to the body's text") {
    const Script s{{"<|content_text|>", "one", " two"}};
    const Run whole = drive(completions_dialect(), request(false), s);
    CHECK(whole.body["object"] == "text_completion");
    CHECK(whole.body["choices"][0]["text"] == "<|content_text|>one two");
    CHECK(whole.body["choices"][0]["logprobs"].is_null());
    const Events e = parse_sse(drive(completions_dialect(), request(true), s).bytes);
    CHECK(e.done);
    CHECK(assemble(e, false).content == whole.body["choices"][0]["text"]);
    // No role chunk: the first event is the first text.
    CHECK(e.events.front()["choices"][0]["text"] == "<|content_text|>");
    for (const auto& ev : e.events)
        if (!ev.contains("usage")) CHECK(ev["object"] == "text_completion");
}

TEST_CASE("OpenAI errors: the body is an error object; mid-stream a data event, then [DONE]") {
    const ApiError err = generation_failure("the engine stopped (killed by signal 9)");
    CHECK(err.status == 503);
    CHECK(err.retry_after == 1);
    const json expected = {{"error",
                            {{"message", "generation failed: the engine stopped (killed by signal 9)"},
                             {"type", "server_error"},
                             {"param", nullptr},
                             {"code", "engine_error"}}}};
    for (const Dialect* d : {&chat_dialect(), &completions_dialect()}) {
        CAPTURE(d->endpoint);
        CHECK(d->error_body(err) == expected);
        CHECK(d->error_body(bad_request("no", "messages"))["error"]["param"] == "messages");
        GenerationRequest g = request(true);
        auto f = d->make(g, {"id-1", 1, "m"});
        GenerationDriver drv(*f, {.stream = true, .message_output = d->message_output, .start_in_content = true, .stop = {}});
        std::string bytes = drv.accepted({"g1", 2, 0});
        bytes += drv.data("partial").bytes;
        const auto end = drv.failed(err);
        CHECK(!end.complete);
        CHECK(!end.error);  // streaming: the error is in the bytes
        bytes += end.bytes;
        const Events e = parse_sse(bytes);
        CHECK(e.done);
        CHECK(e.trailing.empty());
        CHECK(e.events.back() == expected);
        CHECK(assemble(Events{{e.events.begin(), e.events.end() - 1}, true, ""}, d == &chat_dialect()).content == "partial");
        // Not streaming: nothing was sent, the error is the response.
        g.stream = false;
        auto f2 = d->make(g, {"id-2", 1, "m"});
        GenerationDriver quiet(*f2, {.stream = false, .message_output = d->message_output, .start_in_content = true, .stop = {}});
        CHECK(quiet.accepted({"g2", 2, 0}).empty());
        CHECK(quiet.data("partial").bytes.empty());
        const auto failed = quiet.failed(err);
        CHECK(failed.bytes.empty());
        REQUIRE(failed.error);
        CHECK(d->error_body(*failed.error) == expected);
    }
}

TEST_CASE("OpenAI: invalid UTF-8 from the engine goes out as U+FFFD, never as broken JSON") {
    const Run r = drive(completions_dialect(), request(true), {{"a\xff", "b"}});
    const Events e = parse_sse(r.bytes);
    CHECK(assemble(e, false).content == "a\xef\xbf\xbd" "b");
    CHECK(dump_json(json("\xff")) == "\"\xef\xbf\xbd\"");
}
