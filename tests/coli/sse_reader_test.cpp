// coli's SSE reading (tools/coli/sse_reader.h) against the WHATWG event-stream rules.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tools/coli/sse_reader.h"

using coli::SseEvent;
using coli::SseReader;

namespace {

// The data of every event the pieces complete, fed one piece at a time.
std::vector<std::string> data_of(const std::vector<std::string>& pieces) {
    SseReader sse;
    std::vector<std::string> out;
    for (const auto& p : pieces)
        for (const auto& ev : sse.feed(p)) out.push_back(ev.data);
    return out;
}

std::vector<std::string> data_of(const std::string& stream) { return data_of(std::vector<std::string>{stream}); }

}  // namespace

TEST_CASE("sse: events end at a blank line, with lines ending in LF, CRLF or CR") {
    CHECK(data_of("data: a\n\ndata: b\n\n") == std::vector<std::string>{"a", "b"});
    CHECK(data_of("data: a\r\n\r\ndata: b\r\n\r\n") == std::vector<std::string>{"a", "b"});
    CHECK(data_of("data: a\r\rdata: b\r\r") == std::vector<std::string>{"a", "b"});
    CHECK(data_of("data: a\r\n\ndata: b\r\r\n") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("sse: a CRLF split between two reads is one line end, a CR then a CR two") {
    CHECK(data_of(std::vector<std::string>{"data: a\r", "\n\r", "\n"}) == std::vector<std::string>{"a"});
    CHECK(data_of(std::vector<std::string>{"data: a\r", "\r"}) == std::vector<std::string>{"a"});
    CHECK(data_of(std::vector<std::string>{"data: a\r", "", "\n", "\n"}) == std::vector<std::string>{"a"});
}

TEST_CASE("sse: the space after 'data:' is optional and only one is removed") {
    CHECK(data_of("data:x\n\n") == std::vector<std::string>{"x"});
    CHECK(data_of("data: x\n\n") == std::vector<std::string>{"x"});
    CHECK(data_of("data:  x\n\n") == std::vector<std::string>{" x"});
    CHECK(data_of("data\n\n") == std::vector<std::string>{""});
    CHECK(data_of("data:\n\n") == std::vector<std::string>{""});
}

TEST_CASE("sse: several data lines join with LF") {
    CHECK(data_of("data: one\ndata:two\ndata\n\n") == std::vector<std::string>{"one\ntwo\n"});
    CHECK(data_of("data: {\"a\":\ndata: 1}\r\n\r\n") == std::vector<std::string>{"{\"a\":\n1}"});
}

TEST_CASE("sse: comments are skipped, and an event without data is not dispatched") {
    CHECK(data_of(": ping\n\n:\n\ndata: a\n: inside\ndata: b\n\n") == std::vector<std::string>{"a\nb"});
    CHECK(data_of("event: x\n\nid: 3\nretry: 10\n\n").empty());
}

TEST_CASE("sse: the event field names the event, 'message' by default") {
    SseReader sse;
    auto events = sse.feed("event: error\ndata: e\n\ndata: m\n\n");
    REQUIRE(events.size() == 2);
    CHECK(events[0].event == "error");
    CHECK(events[0].data == "e");
    CHECK(events[1].event == "message");
    CHECK(events[1].data == "m");
}

TEST_CASE("sse: an event fed one byte at a time is the same event; one cut off is never returned") {
    const std::string stream = "data: {\"choices\":[]}\r\n\r\n: c\r\ndata: [DONE]\r\n\r\ndata: cut";
    std::vector<std::string> bytes;
    for (char c : stream) bytes.emplace_back(1, c);
    CHECK(data_of(bytes) == std::vector<std::string>{"{\"choices\":[]}", "[DONE]"});
    CHECK(data_of(stream) == std::vector<std::string>{"{\"choices\":[]}", "[DONE]"});
}
