// Every frame kind: golden bytes where the wire is fixed by compatibility, round trips for
// all, and the reader fed the encoding split at every possible point.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "protocol/frame_encode.h"
#include "protocol/frame_reader.h"

using namespace inkling::protocol;

namespace {

std::vector<ReadItem> read_all(Direction dir, std::string_view bytes, std::size_t split) {
    FrameReader r(dir);
    r.feed(bytes.substr(0, split));
    r.feed(bytes.substr(split));
    r.finish();
    std::vector<ReadItem> items;
    while (auto item = r.next()) items.push_back(*item);
    return items;
}

Submit sample_submit() {
    Submit s;
    s.id = "req-7";
    s.slot = 2;
    s.max_tokens = 64;
    s.temperature = 0.7;
    s.top_p = 0.95;
    s.prompt = "line one\nline two \xe2\x82\xac";
    return s;
}

std::vector<Frame> engine_input_frames() {
    Submit plain = sample_submit();
    Submit audio = sample_submit();
    audio.id = "a1";
    audio.prompt = "<|message_user|><|content_audio_input|><|audio|><|end_message|>";
    for (int i = 0; i < 80; ++i) audio.extension += static_cast<char>(i % 16);
    Submit keyed = sample_submit();
    keyed.id = "k1";
    keyed.options = {123456789012345ull, 40, 1.1, true, 5, true, true, 0};
    Submit chat_logprobs = sample_submit();
    chat_logprobs.id = "d1";
    chat_logprobs.options.data_logprobs = 20;
    keyed.prompt = "1 2 3";
    Submit constrained = sample_submit();
    constrained.id = "g1";
    constrained.grammar = R"({"type":"json_object"})";
    Submit audio_and_grammar = audio;
    audio_and_grammar.id = "ag";
    audio_and_grammar.grammar = "{\"type\":\"text\",\"text\":\"\n\"}";
    return {plain, audio, keyed, chat_logprobs, constrained, audio_and_grammar, Stop{"req-7"}, Cancel{"a1"}, StatsRequest{}};
}

std::vector<Frame> engine_output_frames() {
    return {
        Ready{},
        Accept{"req-7", 12, std::nullopt},
        Accept{"req-8", 12, 9},
        Data{"req-7", "\xe2\x82", std::nullopt},
        Data{"req-7", "", std::nullopt},
        Data{"req-7", "\n", TokenLogprobs{-0.25, {{17, -0.25}, {4, -1.5}}}},
        Data{"req-7", "x", TokenLogprobs{-HUGE_VAL, {}}},
        Data{"req-7", "Hel", TokenLogprobs{-0.1, {{9906, -0.1}, {13225, -3.0}, {7, -9.5}}, {"Hel", "lo\n", ""}}},
        Echo{"req-7", 3, "abc", TokenLogprobs{-2.0, {{1, -0.5}}}},
        Done{"req-7", DoneStats{5, 12.345, 87.5, 1.25, 12, true, {{"reused", "9"}, {"ttft_ms", "31"}}}},
        Done{"req-8", DoneStats{0, 0.0, 0.0, 0.0, 3, false, {}}},
        Error{"req-7", ErrorCode::ContextExceeded, "prompt_tokens=9000 requested=9100 capacity=8192"},
        Error{"0", ErrorCode::BadRequest, ""},
        Stats{R"({"kind":"info","model":"m"})"},
        Event{R"({"kind":"device_lost"})"},
    };
}

}  // namespace

TEST_CASE("golden bytes: READY, the audio SUBMIT, DATA, DONE, ERROR") {
    CHECK(encode(Ready{}) == std::string("\x01\x01READY\x01\x01\n", 10));
    Submit s;
    s.id = "1";
    s.max_tokens = 4;
    s.temperature = 0.25;
    s.top_p = 0.9;
    s.prompt = "<|message_user|><|content_audio_input|><|audio|><|end_message|>";
    for (int i = 0; i < 80; ++i) s.extension += static_cast<char>(i % 16);
    CHECK(encode(s) == "SUBMIT 1 0 63 4 0.25 0.9 80\n" + s.prompt + s.extension + "\n");
    CHECK(encode(Data{"3", "hi", std::nullopt}) == "DATA 3 2\nhi\n");
    CHECK(encode(Data{"3", "a", TokenLogprobs{std::nan(""), {}}}) == "DATA 3 1 nan 0\na\n");
    CHECK(encode(Done{"3", DoneStats{2, 10.0, 50.0, 0.5, 7, false, {}}}) ==
          "DONE 3 STAT 2 10.000 50.0 0.500 7 0\n");
    CHECK(encode(Error{"3", ErrorCode::Cancelled, ""}) == "ERROR 3 CANCELLED\n");
    CHECK(encode(Error{"3", ErrorCode::Internal, "a\r\nb"}) == "ERROR 3 INTERNAL a  b\n");
    CHECK(encode(Stop{"3"}) == "STOP 3\n");
    CHECK(encode(StatsRequest{}) == "STATS\n");
    CHECK(encode(Stats{"{}"}) == "STATS 2\n{}\n");
}

// data_logprobs (§6.3): each alternative's length in the tail, its bytes after the token's.
TEST_CASE("golden bytes: DATA with data_logprobs carries the alternatives' bytes") {
    const Data d{"r-19", "Hel", TokenLogprobs{-0.105361, {{9906, -0.105361}, {13225, -2.995732}}, {"Hel", "lo"}}};
    CHECK(encode(d) == "DATA r-19 8 -0.105361 2 9906 -0.105361 3 13225 -2.995732 2\nHelHello\n");
    auto items = read_all(Direction::FromEngine, encode(d), 3);
    REQUIRE(items.size() == 1);
    CHECK(std::get<Data>(std::get<Frame>(items[0])) == d);
    // Lengths that add up past the payload are a malformed frame.
    auto bad = read_all(Direction::FromEngine, "DATA r-19 2 -0.1 1 5 -0.2 3\nab\n", 0);
    REQUIRE(!bad.empty());
    CHECK(std::holds_alternative<Problem>(bad[0]));
    Submit s = sample_submit();
    s.prompt = "p";
    s.options.data_logprobs = 5;
    CHECK(encode(s) == "SUBMIT req-7 2 1 64 0.7 0.95 0 data_logprobs=5\np\n");
    auto both = read_all(Direction::ToEngine, "SUBMIT x 0 1 4 0 1 0 logprobs=1 data_logprobs=1\np\n", 0);
    REQUIRE(both.size() == 1);
    REQUIRE(std::holds_alternative<Problem>(both[0]));
    CHECK(std::get<Problem>(both[0]).detail.find("exclude each other") != std::string::npos);
}

TEST_CASE("SUBMIT keys force field 7 and come in a fixed order") {
    Submit s = sample_submit();
    s.prompt = "p";
    s.options.ids = true;
    s.options.seed = 5;
    CHECK(encode(s) == "SUBMIT req-7 2 1 64 0.7 0.95 0 seed=5 ids=1\np\n");
}

TEST_CASE("a grammar rides at the end of the extension, counted by grammar=N (§12.3)") {
    Submit s = sample_submit();
    s.prompt = "p";
    s.extension.assign(80, '\3');
    s.grammar = "{}";
    CHECK(encode(s) == "SUBMIT req-7 2 1 64 0.7 0.95 82 grammar=2\np" + s.extension + "{}\n");
    Submit g = sample_submit();
    g.prompt = "p";
    g.grammar = "{}";
    g.options.seed = 1;
    CHECK(encode(g) == "SUBMIT req-7 2 1 64 0.7 0.95 2 seed=1 grammar=2\np{}\n");
    auto items = read_all(Direction::ToEngine, encode(s), 5);
    REQUIRE(items.size() == 1);
    const auto& back = std::get<Submit>(std::get<Frame>(items[0]));
    CHECK(back.extension == s.extension);  // the DMel bytes alone
    CHECK(back.grammar == "{}");
    CHECK(back.prompt == "p");
    // More grammar than extension: refused, and the payload still skipped.
    auto bad = read_all(Direction::ToEngine, "SUBMIT a 0 1 4 0 1 2 grammar=3\npxy\nSTOP a\n", 0);
    REQUIRE(bad.size() == 2);
    REQUIRE(std::holds_alternative<Problem>(bad[0]));
    CHECK(std::get<Problem>(bad[0]).detail.find("grammar") != std::string::npos);
    CHECK(std::holds_alternative<Frame>(bad[1]));
}

TEST_CASE("every frame kind round-trips through the reader at every split point") {
    for (auto [dir, frames] : {std::pair{Direction::ToEngine, engine_input_frames()},
                               std::pair{Direction::FromEngine, engine_output_frames()}}) {
        for (const Frame& frame : frames) {
            std::string wire = encode(frame);
            for (std::size_t split = 0; split <= wire.size(); ++split) {
                auto items = read_all(dir, wire, split);
                REQUIRE(items.size() == 1);
                REQUIRE(std::holds_alternative<Frame>(items[0]));
                // Compare bytes: NaN log-probs are unequal to themselves.
                CHECK(encode(std::get<Frame>(items[0])) == wire);
            }
        }
    }
}

TEST_CASE("a whole stream of frames read one byte at a time") {
    std::string wire;
    auto frames = engine_output_frames();
    for (const auto& f : frames) wire += encode(f);
    FrameReader r(Direction::FromEngine);
    for (char c : wire) r.feed(std::string_view(&c, 1));
    std::size_t n = 0;
    while (auto item = r.next()) {
        REQUIRE(std::holds_alternative<Frame>(*item));
        CHECK(encode(std::get<Frame>(*item)) == encode(frames[n]));
        ++n;
    }
    CHECK(n == frames.size());
    CHECK(!r.mid_frame());
}

TEST_CASE("SUBMIT without field 7 but with keys is read too") {
    auto items = read_all(Direction::ToEngine, "SUBMIT a 0 1 4 0 1 ids=1\n7\n", 0);
    REQUIRE(items.size() == 1);
    auto& s = std::get<Submit>(std::get<Frame>(items[0]));
    CHECK(s.options.ids);
    CHECK(s.prompt == "7");
    CHECK(s.extension.empty());
}

TEST_CASE("client side: unknown kinds are skipped, known malformed kinds are problems") {
    FrameReader r(Direction::FromEngine);
    r.feed("HWINFO 8 64 32 0 0 cpu|gpu\nTIERS 1 2 3 0 1\nACCEPT a 3\n");
    auto item = r.next();
    REQUIRE(item);
    CHECK(std::get<Accept>(std::get<Frame>(*item)).prompt_tokens == 3);
    CHECK(r.skipped_lines() == 2);
    for (const char* bad : {"ACCEPT a x\n", "ACCEPT a 3 stray\n", "DATA a 70000\n", "DATA a 1 0.5\nx\n",
                            "DONE a STAT 1 2 3\n", "DONE a STAT 1 x 3 4 5 0\n", "DONE a STAT 1 2 3 4 5 2\n",
                            "ERROR\n", "STATS\n", "ECHO a 1 x 0 0\nz\n"}) {
        FrameReader rr(Direction::FromEngine);
        rr.feed(bad);
        auto got = rr.next();
        REQUIRE_MESSAGE(got, bad);
        CHECK_MESSAGE(std::holds_alternative<Problem>(*got), bad);
    }
}

TEST_CASE("engine side: an ERROR detail keeps its spacing; problems carry the id when readable") {
    FrameReader r(Direction::FromEngine);
    r.feed("ERROR x BAD_REQUEST two  spaces\n");
    CHECK(std::get<Error>(std::get<Frame>(*r.next())).detail == "two  spaces");

    FrameReader e(Direction::ToEngine);
    e.feed("SUBMIT good-id 0 2 4 0 9\nhi\nSTOP bad id\nCANCEL\n");
    auto p1 = std::get<Problem>(*e.next());
    CHECK(p1.id == "good-id");
    CHECK(p1.code == ErrorCode::BadRequest);
    CHECK(p1.detail.find("top_p") != std::string::npos);
    CHECK(std::get<Problem>(*e.next()).id == "bad");
    CHECK(std::get<Problem>(*e.next()).id == "0");
    CHECK(!e.next());
}

TEST_CASE("client side: a newer engine's ACCEPT keys and ERROR codes are tolerated") {
    FrameReader r(Direction::FromEngine);
    r.feed("ACCEPT a 3 reused=2 future=x\nERROR a NO_SUCH_CODE some detail\n");
    auto a = std::get<Accept>(std::get<Frame>(*r.next()));
    CHECK(a.reused == 2u);
    auto e = std::get<Error>(std::get<Frame>(*r.next()));
    CHECK(e.code == ErrorCode::Internal);
    CHECK(e.detail == "NO_SUCH_CODE some detail");
}

TEST_CASE("non-finite STAT numbers are written as 0 so clients can read them") {
    std::string wire = encode(Done{"a", DoneStats{1, INFINITY, NAN, 0.0, 1, false, {}}});
    CHECK(wire == "DONE a STAT 1 0.000 0.0 0.000 1 0\n");
}

// The fuzzer's invariant (tests/fuzz/frame_reader_fuzz.cpp) on the inputs it found: what the
// reader accepts is read back the same after encoding, even where the encoding is not the
// text that was read.
TEST_CASE("a frame read in a non-canonical form re-encodes to bytes that read back the same") {
    auto again = [](Direction dir, const std::string& line) {
        auto items = read_all(dir, line, 0);
        REQUIRE(items.size() == 1);
        if (!std::holds_alternative<Frame>(items[0])) return std::get<Problem>(items[0]).detail;
        const std::string wire = encode(std::get<Frame>(items[0]));
        auto back = read_all(dir, wire, 0);
        REQUIRE(back.size() == 1);
        REQUIRE(std::holds_alternative<Frame>(back[0]));
        CHECK(encode(std::get<Frame>(back[0])) == wire);
        return wire;
    };
    // 1e300 tokens/s was written as "0" (a 64-byte buffer), which read back as 0.
    const std::string big = again(Direction::FromEngine, "DONE a STAT 2 1e300 100.0 0.000 5 0\n");
    auto read_big = read_all(Direction::FromEngine, big, 0);
    REQUIRE(read_big.size() == 1);
    CHECK(std::get<Done>(std::get<Frame>(read_big[0])).stat.tokens_per_second == 1e300);
    // A line under the header limit whose canonical form ("1e9" → "1000000000.000") is over it.
    std::string line = "DONE a STAT 2 1e9 100.0 0.000 5 0 k=";
    line += std::string(kDefaultLimits.max_header_bytes - line.size(), 'v');
    CHECK(again(Direction::FromEngine, line + "\n").find("canonical header would be 4107 bytes") != std::string::npos);
    // An unknown ERROR code is kept as INTERNAL "<code> <detail>", 9 bytes longer.
    CHECK(again(Direction::FromEngine, "ERROR a NEW_CODE" + std::string(4078, ' ') + "x\n")
              .find("canonical header") != std::string::npos);
}

TEST_CASE("absurd declared payload lengths saturate instead of wrapping") {
    FrameReader r(Direction::ToEngine);
    r.feed("SUBMIT a 0 18446744073709551615 1 0 1 1\nSTOP b\n");
    // The declared payload (all of the stream) is still being counted off: the STOP is
    // payload, and nothing comes out until the sender's bytes run out.
    CHECK(!r.next());
    CHECK(r.mid_frame());
}
