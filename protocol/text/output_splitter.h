// Turns an Inkling model's streamed token bytes into the two OpenAI channels. The model
// opens a channel with a content-kind marker: <|content_thinking|> starts reasoning,
// <|content_text|> starts the answer. Every other TMLv0 marker is dropped. Bytes are
// released only as whole UTF-8 characters (a token may end inside one); a sequence that
// can never be valid UTF-8 comes out as U+FFFD rather than breaking the JSON.
#pragma once

#include <string>

namespace inkling::protocol::text {

class OutputSplitter {
public:
    // `start_in_content`: the prompt already opened the answer (effort 0 appends
    // <|content_text|> to the generation prompt).
    explicit OutputSplitter(bool start_in_content) : reasoning_(!start_in_content) {}
    struct Out {
        std::string content, reasoning;
    };
    // One DATA frame's bytes (a whole token).
    Out feed(const std::string& token_bytes);
    Out flush();

private:
    bool reasoning_;
    std::string pending_;
};

// True for the TMLv0 marker tokens: <|content_*|>, <|message_*|>, <|end_message|>,
// <|audio_end|>, <|unused_N|>, …
bool is_marker(const std::string& text);

}  // namespace inkling::protocol::text
