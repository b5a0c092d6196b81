// The SUBMIT header:
//   SUBMIT <id> <slot> <bytes> <max_tokens> <temperature> <top_p>[ <xbytes>][ key=value…]
// The payload is the prompt, then xbytes extension bytes: DMel audio, then the grammar
// (its length the grammar=N key).
// Parsed in two steps so that a reader can always skip a rejected frame's payload: the
// two lengths come out whenever they are numbers, even when another field is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/frames.h"
#include "protocol/limits.h"

namespace inkling::protocol {

struct SubmitHeader {
    // The id when it is valid, else kUnknownId.
    std::string id{kUnknownId};
    // Payload lengths when they parse as numbers (even past the limits: the reader then
    // discards that many bytes to stay in step).
    std::optional<std::uint64_t> prompt_bytes;
    std::uint64_t extension_bytes = 0;
    // grammar=N: the last N of the extension bytes are the constraint (≤ extension_bytes
    // whenever `request` is set).
    std::uint64_t grammar_bytes = 0;
    // Set when every field is valid: the request, payloads still empty.
    std::optional<Submit> request;
    // Otherwise: why not, naming the field.
    std::string problem;
};

// `fields` are the header's whitespace-separated tokens, "SUBMIT" first.
SubmitHeader parse_submit_header(const std::vector<std::string_view>& fields,
                                 const Limits& limits);

// The canonical header line (without LF) for a request whose payloads are set.
std::string format_submit_header(const Submit& submit);

}  // namespace inkling::protocol
