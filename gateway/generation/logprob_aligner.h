// Which generated tokens' log-probs go out, and when: those of the answer's tokens, each once
// its text has gone out. A token's text can come out later than its DATA frame (an
// incomplete UTF-8 character, a possible marker or function name is held by the parser, a
// possible stop sequence by the stop filter) or never (reasoning, markers, tool calls, text
// cut by a stop sequence); its log-probs follow its text, so a stream's chunks carry the
// tokens of their own text and the non-streaming list is the answer's tokens exactly.
//
//   LogprobAligner a;
//   a.add(entry, is_marker(bytes));          // per DATA frame, before feeding its bytes
//   a.produced(content_bytes, other_output); // what feeding them brought out
//   auto ready = a.passed(text);             // the stop filter let this answer text through
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/api/dialect.h"

namespace inkling::gateway {

class LogprobAligner {
public:
    // A token was generated; a marker token is never the answer's.
    void add(TokenLogprob entry, bool marker);
    // What the parse brought out since the last call: `content` bytes of answer text, and
    // whether anything else (reasoning, a call). Tokens still waiting are the answer's when
    // answer text came out, and not when only something else did.
    void produced(std::size_t content, bool other);
    // `text` of the answer went out (after the stop filter): the log-probs of the tokens
    // whose text is now all out, in order, each with its text_offset.
    std::vector<TokenLogprob> passed(std::string_view text);

private:
    enum class State { Waiting, Answer, Other };
    struct Item {
        TokenLogprob entry;
        State state = State::Waiting;
        std::size_t start = 0, end = 0;  // its bytes in the answer text (before the stop filter)
    };
    std::deque<Item> items_;
    std::size_t produced_ = 0;  // answer bytes the parse brought out
    std::string passed_;        // answer text that went out
    std::size_t counted_bytes_ = 0, counted_points_ = 0;  // code points of passed_[0, counted_bytes_)
};

}  // namespace inkling::gateway
