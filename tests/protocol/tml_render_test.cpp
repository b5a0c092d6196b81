#include <doctest/doctest.h>

#include <stdexcept>

#include "protocol/tml_render.h"

using namespace inkling::protocol::tml;

namespace {
Message user(std::string text) { return {Role::User, {Part::text_part(std::move(text))}, {}}; }
Message system_msg(std::string text) { return {Role::System, {Part::text_part(std::move(text))}, {}}; }
Message assistant(std::string text) { return {Role::Assistant, {Part::text_part(std::move(text))}, {}}; }
}  // namespace

// The worked examples of the TMLv0 spec (third-party ports pin the same strings).
TEST_CASE("system + user at effort 0.9: effort line before the first non-system message") {
    CHECK(render({system_msg("Be concise."), user("Hello")}, {.effort = 0.9}) ==
          "<|message_system|><|content_text|>Be concise.<|end_message|>"
          "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>"
          "<|message_user|><|content_text|>Hello<|end_message|><|message_model|>");
}

TEST_CASE("user only; effort 0 forces content mode and prints as 0") {
    CHECK(render({user("hi")}, {.effort = 0.9}) ==
          "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>"
          "<|message_user|><|content_text|>hi<|end_message|><|message_model|>");
    CHECK(render({user("hi")}, {}) ==
          "<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>"
          "<|message_user|><|content_text|>hi<|end_message|><|message_model|><|content_text|>");
}

TEST_CASE("effort levels map as specified") {
    CHECK(effort_for_level("none") == 0.0);
    CHECK(effort_for_level("minimal") == 0.1);
    CHECK(effort_for_level("low") == 0.2);
    CHECK(effort_for_level("medium") == 0.7);
    CHECK(effort_for_level("high") == 0.9);
    CHECK(effort_for_level("max") == 0.99);
    CHECK(effort_for_level("xhigh") == 0.99);
    CHECK(!effort_for_level("extreme"));
    CHECK(format_effort(0.99) == "0.99");
    CHECK(format_effort(0.1) == "0.1");
}

TEST_CASE("an effort's level name is the table's first with that effort; the names list the table") {
    CHECK(level_for_effort(0.0) == "none");
    CHECK(level_for_effort(0.9) == "high");
    CHECK(level_for_effort(0.99) == "max");
    CHECK(!level_for_effort(0.5));
    for (const auto& l : kEffortLevels) CHECK(effort_for_level(*level_for_effort(l.effort)) == l.effort);
    CHECK(effort_level_names() == "none, minimal, low, medium, high, max, xhigh");
}

TEST_CASE("all-system conversations get the effort line appended") {
    CHECK(render({system_msg("S")}, {.effort = 0.2}) ==
          "<|message_system|><|content_text|>S<|end_message|>"
          "<|message_system|><|content_text|>Thinking effort level: 0.2<|end_message|><|message_model|>");
}

TEST_CASE("assistant history ends with end-sampling; thinking and text are separate messages") {
    Message a{Role::Assistant, {Part::thinking("let me see"), Part::text_part("42")}, {}};
    CHECK(render({user("q"), a, user("again")}, {.effort = 0.7}) ==
          "<|message_system|><|content_text|>Thinking effort level: 0.7<|end_message|>"
          "<|message_user|><|content_text|>q<|end_message|>"
          "<|message_model|><|content_thinking|>let me see<|end_message|>"
          "<|message_model|><|content_text|>42<|end_message|><|content_model_end_sampling|>"
          "<|message_user|><|content_text|>again<|end_message|><|message_model|>");
}

TEST_CASE("audio parts become their own user message with one placeholder per frame") {
    Message m{Role::User, {Part::text_part("what is said?"), Part::audio(3)}, {}};
    CHECK(render({m}, {}) ==
          "<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>"
          "<|message_user|><|content_text|>what is said?<|end_message|>"
          "<|message_user|><|content_audio_input|><|audio|><|audio|><|audio|><|audio_end|><|end_message|>"
          "<|message_model|><|content_text|>");
}

TEST_CASE("tool results carry the author name; empty content renders nothing") {
    Message tool{Role::Tool, {Part::text_part("hello")}, "read_file"};
    CHECK(render({user("x"), tool}, {.effort = 0.9}).find(
              "<|message_tool|>read_file<|content_text|>hello<|end_message|>") != std::string::npos);
    CHECK(render({user(""), Message{Role::Assistant, {}, {}}}, {.effort = 0.9}) ==
          "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|><|message_model|>");
}

TEST_CASE("without a generation prompt a final assistant message stays open") {
    CHECK(render({user("q"), assistant("The answer is")}, {.effort = 0.9, .add_generation_prompt = false}) ==
          "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>"
          "<|message_user|><|content_text|>q<|end_message|>"
          "<|message_model|><|content_text|>The answer is");
}

TEST_CASE("extension property: each turn's prompt is a byte prefix of the next turn's") {
    for (double effort : {0.0, 0.9}) {
        std::vector<Message> chat{system_msg("sys"), user("one")};
        std::string before = render(chat, {.effort = effort});
        chat.push_back(assistant("reply"));
        chat.push_back(user("two"));
        std::string after = render(chat, {.effort = effort});
        CHECK(after.compare(0, before.size(), before) == 0);
    }
}

TEST_CASE("parts a role cannot carry and bad efforts are refused") {
    CHECK_THROWS_AS(render({Message{Role::User, {Part::thinking("x")}, {}}}, {}), std::invalid_argument);
    CHECK_THROWS_AS(render({Message{Role::Assistant, {Part::audio(2)}, {}}}, {}), std::invalid_argument);
    CHECK_THROWS_AS(render({Message{Role::User, {Part::audio(0)}, {}}}, {}), std::invalid_argument);
    CHECK_THROWS_AS(render({user("x")}, {.effort = 1.5}), std::invalid_argument);
}

TEST_CASE("an open final assistant message stays open even when its last part is empty") {
    Message a{Role::Assistant, {Part::text_part("Hel"), Part::text_part("")}, {}};
    CHECK(render({user("q"), a}, {.effort = 0.9, .add_generation_prompt = false})
              .ends_with("<|message_model|><|content_text|>Hel"));
}

// docs/model.md "Tools": the declaration block comes before everything, the caller's system
// messages included, then the effort line; with tools the generation prompt stays bare at
// effort 0.
TEST_CASE("tools: tool_declare block first, then system, effort, user, a bare model turn") {
    const std::string decl = R"([{"description":"Read a file","name":"read_file","parameters":{"properties":{"path":{"type":"string"}},"type":"object"},"type":"function"}])";
    RenderOptions o;
    o.tools = decl;
    CHECK(render({system_msg("Be concise."), user("Read a.txt")}, o) ==
          "<|message_system|>tool_declare<|content_xml|>" + decl + "<|end_message|>"
          "<|message_system|><|content_text|>Be concise.<|end_message|>"
          "<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>"
          "<|message_user|><|content_text|>Read a.txt<|end_message|><|message_model|>");
    o.effort = 0.9;
    CHECK(render({user("hi")}, o) ==
          "<|message_system|>tool_declare<|content_xml|>" + decl + "<|end_message|>"
          "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>"
          "<|message_user|><|content_text|>hi<|end_message|><|message_model|>");
}

// A worked example a third-party Swift port pins: a call, end-sampling, then its result.
TEST_CASE("tools: an assistant call and its result render as the spec's history") {
    const std::string call = R"({"name":"read_file","args":{"path":"a.txt"}})";
    Message calls{Role::Assistant, {Part::tool_call("read_file", call)}, {}};
    Message result{Role::Tool, {Part::text_part("hello")}, "read_file"};
    const std::string prompt = render({user("Read a.txt"), calls, result}, {.effort = 0.9});
    CHECK(prompt ==
          "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>"
          "<|message_user|><|content_text|>Read a.txt<|end_message|>"
          "<|message_model|>read_file<|content_invoke_tool_json|>" + call + "<|end_message|><|content_model_end_sampling|>"
          "<|message_tool|>read_file<|content_text|>hello<|end_message|><|message_model|>");
}

// docs/model.md "Tools": reasoning, then text, then the calls (each its own message), one
// end-sampling.
TEST_CASE("tools: reasoning, text and two calls in one assistant turn") {
    Message turn{Role::Assistant,
                 {Part::thinking("t"), Part::text_part("x"), Part::tool_call("f", R"({"name":"f","args":{}})"),
                  Part::tool_call("g", R"({"name":"g","args":{"a":1}})")},
                 {}};
    CHECK(render({user("u"), turn, user("v")}, {.effort = 0.9}).find(
        "<|message_user|><|content_text|>u<|end_message|>"
        "<|message_model|><|content_thinking|>t<|end_message|><|message_model|><|content_text|>x<|end_message|>"
        "<|message_model|>f<|content_invoke_tool_json|>{\"name\":\"f\",\"args\":{}}<|end_message|>"
        "<|message_model|>g<|content_invoke_tool_json|>{\"name\":\"g\",\"args\":{\"a\":1}}<|end_message|>"
        "<|content_model_end_sampling|><|message_user|><|content_text|>v") != std::string::npos);
    CHECK_THROWS_AS(render({{Role::User, {Part::tool_call("f", "{}")}, {}}}, {}), std::invalid_argument);
    CHECK_THROWS_AS(render({{Role::Assistant, {Part::tool_call("", "{}")}, {}}}, {}), std::invalid_argument);
}
