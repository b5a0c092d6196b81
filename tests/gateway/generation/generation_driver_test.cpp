// The generation driver (gateway/generation/generation_driver.cpp) on its own terms: stop sequences
// are held back and end the request with one STOP, what the engine sends after it is
// dropped, the reasoning/content split applies to message output only, and engine errors
// map to the statuses a client should see.
#include <doctest/doctest.h>

#include "gateway/api/openai/dialect_chat.h"
#include "gateway/api/openai/dialect_completions.h"
#include "support/gateway_drive.h"

using namespace inkling::gateway;
using namespace inkling::gateway::test;
namespace protocol = inkling::protocol;

TEST_CASE("driver: a stop sequence split across tokens never leaks; one STOP; later tokens dropped") {
    for (bool stream : {false, true}) {
        CAPTURE(stream);
        GenerationRequest g;
        g.stream = stream;
        g.stop = {"END"};
        const Run r = drive(chat_dialect(), g, {{"abc E", "N", "D tail", "more", "END again"}});
        CHECK(r.stops == std::vector<std::size_t>{2});
        CHECK(r.finish == Finish::StopSequence);
        const std::string content =
            stream ? assemble(parse_sse(r.bytes), true).content : r.body["choices"][0]["message"]["content"].get<std::string>();
        CHECK(content == "abc ");
    }
}

TEST_CASE("driver: text held back for a possible stop sequence is released at DONE") {
    GenerationRequest g;
    g.stop = {"STOP"};
    const Run r = drive(completions_dialect(), g, {{"xyz", "ST"}});
    CHECK(r.stops.empty());
    CHECK(r.finish == Finish::EndOfTurn);
    CHECK(r.body["choices"][0]["text"] == "xyzST");
}

TEST_CASE("driver: stop sequences apply to the answer, never to the reasoning") {
    GenerationRequest g;
    g.start_in_content = false;
    g.stop = {"think"};
    const Run r = drive(chat_dialect(), g, {{"I think", "<|content_text|>", "so I think"}});
    CHECK(r.body["choices"][0]["message"]["reasoning_content"] == "I think");
    CHECK(r.body["choices"][0]["message"]["content"] == "so I ");
    CHECK(r.stops == std::vector<std::size_t>{2});
}

TEST_CASE("driver: usage counts the prompt from ACCEPT (reused ones among them) and the tokens from DONE") {
    GenerationRequest g;
    auto f = chat_dialect().make(g, {"id", 0, "m"});
    GenerationDriver d(*f, {});
    CHECK(d.accepted({"g1", 40, 25}).empty());
    CHECK(d.usage().prompt_tokens == 40);
    CHECK(d.usage().cached_tokens == 25);
    protocol::DoneStats stat;
    stat.emitted = 9;
    d.done(stat);
    CHECK(d.usage().completion_tokens == 9);
    CHECK(d.accepted({"g2", 5, std::nullopt}).empty());  // an engine that sends no reused=
    CHECK(d.usage().cached_tokens == 0);
}

TEST_CASE("driver: engine refusals before ACCEPT map to 400, 429 + Retry-After, or 500") {
    using protocol::ErrorCode;
    const ApiError ctx = engine_refusal({"g1", ErrorCode::ContextExceeded, "4100 > 4096"});
    CHECK(ctx.status == 400);
    CHECK(ctx.code == "context_length_exceeded");
    CHECK(std::string(ctx.what()).find("4100 > 4096") != std::string::npos);
    const ApiError busy = engine_refusal({"g1", ErrorCode::SlotBusy, ""});
    CHECK(busy.status == 429);
    CHECK(busy.retry_after == 1);
    CHECK(engine_refusal({"g1", ErrorCode::Overloaded, ""}).status == 429);
    CHECK(engine_refusal({"g1", ErrorCode::BadRequest, "x"}).status == 400);
    const ApiError internal = engine_refusal({"g1", ErrorCode::Internal, "boom"});
    CHECK(internal.status == 500);
    CHECK(internal.code == "engine_error");
    CHECK(std::string(internal.what()) == "the engine failed the request: INTERNAL boom");
}

TEST_CASE("answer: neighbouring pieces of one channel merge into one block, in order") {
    Answer a;
    a.add(Channel::Reasoning, "a");
    a.add(Channel::Reasoning, "b");
    a.add(Channel::Content, "c");
    a.add(Channel::Content, "");
    a.add(Channel::Reasoning, "d");
    REQUIRE(a.blocks.size() == 3);
    CHECK(a.blocks[0].text == "ab");
    CHECK(a.blocks[2].channel == Channel::Reasoning);
    CHECK(a.text(Channel::Reasoning) == "abd");
    CHECK(a.text(Channel::Content) == "c");
}
