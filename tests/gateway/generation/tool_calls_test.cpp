// The tool-call parser (gateway/generation/tool_calls.h): the model's TMLv0 output →
// channels and calls, the same whatever way the bytes are split, released as early as a
// streaming client needs.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gateway/generation/tool_calls.h"

using namespace inkling::gateway;
using Kind = ToolCallParser::Event::Kind;

namespace {

struct Call {
    std::string name, arguments;
    bool operator==(const Call&) const = default;
};

// What a client puts together from the events; `order` checks every call's events come as
// CallStart, CallArguments…, CallEnd with indexes 0, 1, … and none interleaved.
struct Assembled {
    std::string content, reasoning;
    std::vector<Call> calls;
    std::string sequence;  // "c" content, "r" reasoning, "T" a call, in output order (runs merged)
    bool operator==(const Assembled&) const = default;
};

Assembled assemble(const std::vector<ToolCallParser::Event>& events) {
    Assembled a;
    bool open = false;
    auto mark = [&](char c) {
        if (a.sequence.empty() || a.sequence.back() != c || c == 'T') a.sequence += c;
    };
    for (const auto& e : events) {
        switch (e.kind) {
        case Kind::Text:
            REQUIRE_FALSE(open);
            REQUIRE_FALSE(e.text.empty());
            (e.channel == Channel::Content ? a.content : a.reasoning) += e.text;
            mark(e.channel == Channel::Content ? 'c' : 'r');
            break;
        case Kind::CallStart:
            REQUIRE_FALSE(open);
            REQUIRE(e.call == a.calls.size());
            a.calls.push_back({e.text, {}});
            open = true;
            mark('T');
            break;
        case Kind::CallArguments:
            REQUIRE(open);
            REQUIRE(e.call + 1 == a.calls.size());
            a.calls.back().arguments += e.text;
            break;
        case Kind::CallEnd:
            REQUIRE(open);
            REQUIRE(e.call + 1 == a.calls.size());
            open = false;
            break;
        }
    }
    REQUIRE_FALSE(open);
    return a;
}

Assembled parse(const std::vector<std::string>& pieces, ToolCallParser::Options o) {
    ToolCallParser p(o);
    std::vector<ToolCallParser::Event> ev;
    for (const auto& s : pieces) p.feed(s, ev);
    p.finish(ev);
    return assemble(ev);
}

// The same output fed whole, one byte at a time, and split in two at every byte boundary.
Assembled parse_every_split(const std::string& out, ToolCallParser::Options o) {
    const Assembled whole = parse({out}, o);
    std::vector<std::string> bytes;
    for (char c : out) bytes.emplace_back(1, c);
    CHECK(parse(bytes, o) == whole);
    for (std::size_t i = 0; i <= out.size(); ++i) {
        INFO("split at byte " << i);
        REQUIRE(parse({out.substr(0, i), out.substr(i)}, o) == whole);
    }
    return whole;
}

constexpr ToolCallParser::Options kTools{.start = Channel::Reasoning, .calls = true};

}  // namespace

TEST_CASE("tool calls: reasoning, text and two calls in one turn, at every split") {
    const std::string out =
        "<|content_thinking|>Weather in two cities.<|content_text|>Checking caf\xc3\xa9s.<|end_message|>"
        "<|message_model|>get_weather<|content_invoke_tool_json|>{\"name\":\"get_weather\",\"args\":{\"city\":\"Oslo\",\"units\":[\"c\",\"}\"]}}<|end_message|>"
        "<|message_model|>get_time<|content_invoke_tool_json|>{\"name\":\"get_time\",\"args\":{\"tz\":\"Europe/Paris \\\"x\\\" <tag>\"}}<|end_message|>";
    const Assembled a = parse_every_split(out, kTools);
    CHECK(a.reasoning == "Weather in two cities.");
    CHECK(a.content == "Checking caf\xc3\xa9s.");
    REQUIRE(a.calls.size() == 2);
    CHECK(a.calls[0] == Call{"get_weather", R"({"city":"Oslo","units":["c","}"]})"});
    CHECK(a.calls[1] == Call{"get_time", R"({"tz":"Europe/Paris \"x\" <tag>"})"});
    CHECK(a.sequence == "rcTT");
}

TEST_CASE("tool calls: a call as the turn's first message (the generation prompt opened it)") {
    const std::string out = "lookup<|content_invoke_tool_json|>{\"name\":\"lookup\",\"args\":{\"q\":\"\xe2\x82\xac 5\"}}<|end_message|>";
    const Assembled a = parse_every_split(out, kTools);
    CHECK(a.content.empty());
    CHECK(a.reasoning.empty());
    REQUIRE(a.calls.size() == 1);
    CHECK(a.calls[0] == Call{"lookup", "{\"q\":\"\xe2\x82\xac 5\"}"});
}

TEST_CASE("tool calls: the envelope names the call when no author did, in either key order") {
    const Assembled a = parse_every_split(
        "<|content_invoke_tool_json|>{\"name\":\"f\\u0031\",\"args\":{\"a\":1}}<|end_message|>"
        "<|message_model|><|content_invoke_tool_json|>{ \"args\" : [1, {\"b\": null}] , \"name\" : \"g\" }<|end_message|>",
        kTools);
    REQUIRE(a.calls.size() == 2);
    CHECK(a.calls[0] == Call{"f1", R"({"a":1})"});
    CHECK(a.calls[1] == Call{"g", R"([1, {"b": null}])"});
}

TEST_CASE("tool calls: scalar arguments end at the envelope's delimiter; none at all is {}") {
    const Assembled a = parse_every_split(
        "n<|content_invoke_tool_json|>{\"name\":\"n\",\"args\":42}<|end_message|>"
        "<|message_model|>m<|content_invoke_tool_json|>{\"name\":\"m\"}<|end_message|>",
        kTools);
    REQUIRE(a.calls.size() == 2);
    CHECK(a.calls[0] == Call{"n", "42"});
    CHECK(a.calls[1] == Call{"m", "{}"});
}

TEST_CASE("tool calls: output cut mid-arguments ends the call with what was written") {
    const Assembled a = parse_every_split("f<|content_invoke_tool_json|>{\"name\":\"f\",\"args\":{\"city\":\"Os", kTools);
    REQUIRE(a.calls.size() == 1);
    CHECK(a.calls[0] == Call{"f", "{\"city\":\"Os"});
}

TEST_CASE("tool calls: an author that names no call is text, and text keeps every non-marker '<'") {
    const Assembled a = parse_every_split("Hello a<b, x <|y <|content_text|>ok <|unused_7|>done", kTools);
    CHECK(a.reasoning == "Hello a<b, x <|y ");
    CHECK(a.content == "ok done");
    CHECK(a.calls.empty());
    // A name-like author followed by a text marker: text of the channel it ends.
    const Assembled b = parse_every_split("maybe<|content_text|>answer", kTools);
    CHECK(b.reasoning == "maybe");
    CHECK(b.content == "answer");
}

TEST_CASE("tool calls: without declared tools the invoke marker is dropped and the rest is text") {
    const Assembled a = parse_every_split("f<|content_invoke_tool_json|>{\"args\":{}}", {.start = Channel::Content, .calls = false});
    CHECK(a.calls.empty());
    CHECK(a.content == "f{\"args\":{}}");
}

TEST_CASE("tool calls: invalid UTF-8 is U+FFFD in text and arguments alike") {
    const Assembled a = parse_every_split("x\xff<|content_invoke_tool_json|>{\"name\":\"f\",\"args\":\"\xc3\"}", kTools);
    CHECK(a.reasoning == "x\xef\xbf\xbd");
    REQUIRE(a.calls.size() == 1);
    CHECK(a.calls[0].arguments == "\"\xef\xbf\xbd\"");
}

TEST_CASE("tool calls: streaming releases text at once and a call's name at its marker") {
    ToolCallParser p({.start = Channel::Content, .calls = false});
    std::vector<ToolCallParser::Event> ev;
    p.feed("Hel", ev);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].text == "Hel");
    p.feed("<|cont", ev);  // possibly a marker: held
    CHECK(ev.size() == 1);
    p.feed("ent_text|> a", ev);
    REQUIRE(ev.size() == 2);
    CHECK(ev[1].text == " a");

    ToolCallParser t(kTools);
    ev.clear();
    t.feed("get_weather", ev);  // a possible name: held
    CHECK(ev.empty());
    t.feed("<|content_invoke_tool_json|>", ev);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0] == ToolCallParser::Event{Kind::CallStart, Channel::Content, 0, "get_weather"});
    t.feed("{\"name\":\"get_weather\",\"args\":{\"ci", ev);
    REQUIRE(ev.size() == 2);
    CHECK(ev[1] == ToolCallParser::Event{Kind::CallArguments, Channel::Content, 0, "{\"ci"});
    CHECK(t.calls_started() == 1);
}
