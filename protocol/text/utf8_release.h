// Releasing streamed bytes as whole UTF-8 characters: a token may end inside a character,
// and JSON (SSE events, bodies) must carry valid UTF-8. Shared by the output splitter (coli)
// and the tool-call parser (the gateway), so both replace the same bytes the same way.
#pragma once

#include <string>

namespace inkling::protocol::text {

// Moves the complete UTF-8 characters at the front of `pending` out; a byte that can never
// be part of valid UTF-8 (overlongs and surrogates included) comes out as U+FFFD. An
// incomplete sequence at the end stays in `pending`, unless `final` (then it is U+FFFD too).
std::string take_utf8(std::string& pending, bool final);

}  // namespace inkling::protocol::text
