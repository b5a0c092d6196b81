// The model's TMLv0 output → text in its channels and tool calls, as the bytes stream in.
// What an Inkling model emits (docs/model.md, "What the model writes"):
//
//   <|content_thinking|>…<|content_text|>…<|end_message|>        reasoning, then the answer
//   <|message_model|>get_weather<|content_invoke_tool_json|>{"name":"get_weather","args":{…}}<|end_message|>
//
// A content-kind marker opens a channel; after <|message_model|> the text up to the content
// kind is the message's author, which for <|content_invoke_tool_json|> is the function's
// name; the JSON envelope carries the name again and the arguments (`args`). Several calls
// may follow one another in one turn. Every other marker is dropped.
//
//   ToolCallParser p({.start = Channel::Reasoning, .calls = true});
//   std::vector<ToolCallParser::Event> ev;
//   p.feed(data_frame_bytes, ev);   // per DATA frame (any split works: markers and UTF-8
//   p.finish(ev);                   //  characters may straddle feeds), then once at the end
//
// Events come in output order. A call is CallStart (its name), CallArguments fragments
// (the `args` value's JSON text as the model wrote it, in pieces), CallEnd; arguments join
// to the same text however the bytes were split. Text and fragments are valid UTF-8 (bytes
// that cannot be are U+FFFD) and released as soon as they can no longer be part of a
// marker: the parser is streaming, at most one marker's bytes (or, with calls, a name's 64)
// are held. Markers are recognised in the text, as the tokenizer does (docs/model.md): a marker
// string always is one token, so text never spells one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/generation/channel.h"

namespace inkling::gateway {

class ToolCallParser {
public:
    struct Options {
        // The channel of text before any content-kind marker: the prompt's generation turn
        // opened it (<|content_text|> at effort 0) or the model starts by thinking.
        Channel start = Channel::Content;
        // Tools were declared: <|content_invoke_tool_json|> opens a call, and text right
        // after the generation prompt's (or a later) <|message_model|> is held as a
        // possible function name. Without, the invoke marker is dropped like any other and
        // what follows is text, so output without tools streams exactly as before.
        bool calls = false;
    };

    struct Event {
        enum class Kind { Text, CallStart, CallArguments, CallEnd };
        Kind kind = Kind::Text;
        Channel channel = Channel::Content;  // Text
        std::size_t call = 0;                // the call's index in the turn: 0, 1, …
        std::string text;                    // Text; CallStart: the name; CallArguments: a fragment
        bool operator==(const Event&) const = default;
    };

    explicit ToolCallParser(Options options);

    void feed(std::string_view bytes, std::vector<Event>& out);
    // The end of the output: what is held comes out, an open call ends (with arguments
    // `{}` when the envelope gave none).
    void finish(std::vector<Event>& out);

    std::size_t calls_started() const { return calls_; }

    // The longest function name held before its <|content_invoke_tool_json|> (OpenAI's
    // limit); a longer author is text.
    static constexpr std::size_t kMaxName = 64;

private:
    enum class State { Header, Text, Call };
    // The envelope {"name": …, "args": …} read one byte at a time.
    struct Envelope {
        enum class At { Start, KeyOrEnd, Key, Colon, Value, AfterValue, Done, Bad };
        enum class Target { Skip, Name, Args };
        At at = At::Start;
        Target target = Target::Skip;
        std::string key, name_json;
        bool escaped = false, in_string = false, started = false, scalar = false, saw_args = false;
        int depth = 0;
    };

    void byte(char b, std::vector<Event>& out);
    void data(char b, std::vector<Event>& out);
    void marker(const std::string& m, std::vector<Event>& out);
    void envelope_byte(char b, std::vector<Event>& out);
    void value_byte(char b, std::vector<Event>& out);  // one byte of the current value
    void to_value(char b, std::vector<Event>& out);    // the byte belongs to the value: route it
    void start_call(std::string name, std::vector<Event>& out);
    void end_call(std::vector<Event>& out);
    void release_header();  // held text that named no call is text after all
    void flush_text(bool final, std::vector<Event>& out);
    void flush_arguments(bool final, std::vector<Event>& out);

    Options options_;
    State state_;
    Channel channel_;
    std::string held_;     // a marker's bytes so far
    std::string header_;   // a possible function name
    std::string text_;     // text bytes not yet released (an incomplete UTF-8 character)
    std::string args_;     // argument bytes not yet released
    std::string unnamed_;  // arguments that came before the call had a name
    bool named_ = false;   // the open call's CallStart went out
    bool any_args_ = false;
    std::size_t calls_ = 0;
    std::size_t first_new_ = 0;  // this call's first event in `out`: only those are merged
    Envelope env_;
};

}  // namespace inkling::gateway
