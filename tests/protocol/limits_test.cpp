// Each limit of limits.h at its boundary and one past it.
#include <doctest/doctest.h>

#include "protocol/fields.h"
#include "protocol/frame_reader.h"
#include "protocol/submit_header.h"

using namespace inkling::protocol;

namespace {

SubmitHeader parse(const std::string& line) { return parse_submit_header(split_fields(line), kDefaultLimits); }

bool accepts(const std::string& line) { return parse(line).request.has_value(); }

// Reads `wire` and returns the first item's kind: "frame" or the problem's code.
std::string first_item(Direction dir, const std::string& wire, const Limits& limits = kDefaultLimits) {
    FrameReader r(dir, limits);
    r.feed(wire);
    r.finish();
    auto item = r.next();
    if (!item) return "none";
    if (std::holds_alternative<Frame>(*item)) return "frame";
    return std::string(to_string(std::get<Problem>(*item).code));
}

}  // namespace

TEST_CASE("header line: 4096 bytes is read, 4097 is refused without buffering") {
    std::string at = "STOP " + std::string(4096 - 5, 'a');
    CHECK(first_item(Direction::ToEngine, at + "\n") == "BAD_REQUEST");  // id too long, but read
    std::string past = at + "a";
    CHECK(first_item(Direction::ToEngine, past + "\n") == "BAD_FRAME");
    // Past the limit the rest of the line is dropped as it streams: 1 MiB costs nothing.
    FrameReader r(Direction::ToEngine);
    r.feed(std::string(1 << 20, 'x'));
    r.feed("\nSTOP a\n");
    CHECK(std::get<Problem>(*r.next()).code == ErrorCode::BadFrame);
    CHECK(std::holds_alternative<Frame>(*r.next()));
}

TEST_CASE("prompt bytes: 16 MiB accepted, 16 MiB + 1 refused") {
    CHECK(accepts("SUBMIT a 0 16777216 1 0 1"));
    auto h = parse("SUBMIT a 0 16777217 1 0 1");
    CHECK(!h.request);
    CHECK(h.prompt_bytes == 16777217u);  // still known, so the payload can be skipped
    CHECK(h.problem.find("16777216") != std::string::npos);
}

TEST_CASE("extension bytes: 64 MiB accepted, 64 MiB + 1 refused") {
    CHECK(accepts("SUBMIT a 0 1 1 0 1 67108864"));
    auto h = parse("SUBMIT a 0 1 1 0 1 67108865");
    CHECK(!h.request);
    CHECK(h.extension_bytes == 67108865u);
}

TEST_CASE("id: 63 characters accepted, 64 refused") {
    CHECK(accepts("SUBMIT " + std::string(63, 'i') + " 0 1 1 0 1"));
    auto h = parse("SUBMIT " + std::string(64, 'i') + " 0 1 1 0 1");
    CHECK(!h.request);
    CHECK(h.id == "0");
}

TEST_CASE("max_tokens: 1 and 2^20 accepted; 0 only with logprobs; 2^20 + 1 refused") {
    CHECK(accepts("SUBMIT a 0 1 1 0 1"));
    CHECK(accepts("SUBMIT a 0 1 1048576 0 1"));
    CHECK(!accepts("SUBMIT a 0 1 1048577 0 1"));
    CHECK(!accepts("SUBMIT a 0 1 0 0 1"));
    CHECK(accepts("SUBMIT a 0 1 0 0 1 0 logprobs=1"));
    CHECK(!accepts("SUBMIT a 0 1 -1 0 1"));
}

TEST_CASE("temperature in [0, 2], top_p in (0, 1]") {
    CHECK(accepts("SUBMIT a 0 1 1 0 1"));
    CHECK(accepts("SUBMIT a 0 1 1 2 1"));
    CHECK(!accepts("SUBMIT a 0 1 1 2.0000001 1"));
    CHECK(!accepts("SUBMIT a 0 1 1 -0.1 1"));
    CHECK(accepts("SUBMIT a 0 1 1 0 0.000001"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 0"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1.0000001"));
}

TEST_CASE("slot 0..65535 at the parser") {
    CHECK(accepts("SUBMIT a 65535 1 1 0 1"));
    CHECK(!accepts("SUBMIT a 65536 1 1 0 1"));
}

TEST_CASE("keys: logprobs <= 32, top_k <= 2^20, repetition_penalty in (0, 10], flags 0/1") {
    CHECK(accepts("SUBMIT a 0 1 1 0 1 0 logprobs=32"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 logprobs=33"));
    CHECK(accepts("SUBMIT a 0 1 1 0 1 0 top_k=1048576"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 top_k=1048577"));
    CHECK(accepts("SUBMIT a 0 1 1 0 1 0 repetition_penalty=10"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 repetition_penalty=10.01"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 repetition_penalty=0"));
    CHECK(accepts("SUBMIT a 0 1 1 0 1 0 seed=18446744073709551615"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 seed=18446744073709551616"));
    for (const char* flag : {"ids", "pin", "reset"}) {
        CHECK(accepts(std::string("SUBMIT a 0 1 1 0 1 0 ") + flag + "=1"));
        CHECK(!accepts(std::string("SUBMIT a 0 1 1 0 1 0 ") + flag + "=2"));
        CHECK(!accepts(std::string("SUBMIT a 0 1 1 0 1 0 ") + flag + "="));
    }
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 =1"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 seed=1 seed=1"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 color=red"));
    // grammar: at most 1 MiB, and no more than the extension holds.
    CHECK(accepts("SUBMIT a 0 1 1 0 1 1048576 grammar=1048576"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 1048577 grammar=1048577"));
    CHECK(accepts("SUBMIT a 0 1 1 0 1 5 grammar=5"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 5 grammar=6"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 grammar=1"));
    CHECK(!accepts("SUBMIT a 0 1 1 0 1 0 seed=1 stray"));
}

TEST_CASE("DATA payload: 65536 bytes read, 65537 refused; JSON frames <= 4 MiB") {
    std::string at(65536, 'd');
    CHECK(first_item(Direction::FromEngine, "DATA a 65536\n" + at + "\n") == "frame");
    CHECK(first_item(Direction::FromEngine, "DATA a 65537\n" + at + "d\n") == "BAD_FRAME");
    CHECK(first_item(Direction::FromEngine, "STATS 4194305\n") == "BAD_FRAME");
}

TEST_CASE("a refused SUBMIT's payload is counted off, not stored, and the next frame is intact") {
    Limits small;
    small.max_prompt_bytes = 8;
    FrameReader r(Direction::ToEngine, small);
    r.feed("SUBMIT big 0 1000 1 0 1\n");
    for (int i = 0; i < 10; ++i) r.feed(std::string(100, 'S'));  // looks like headers: must not be
    r.feed("\nSTOP after\n");
    auto p = std::get<Problem>(*r.next());
    CHECK(p.id == "big");
    CHECK(p.code == ErrorCode::BadRequest);
    CHECK(std::get<Stop>(std::get<Frame>(*r.next())).id == "after");
    CHECK(!r.next());
}
