// The closed set of ERROR codes an engine may send. PROTOCOL.md §Errors says when each
// is used and which HTTP status the gateway maps it to.
#pragma once

#include <optional>
#include <string_view>

namespace inkling::protocol {

enum class ErrorCode {
    BadFrame,         // framing broken: oversize header, short payload, missing LF
    BadRequest,       // a field, key, command or prompt byte is wrong
    SlotBusy,         // the slot is generating another request
    DuplicateId,      // the id is already in flight
    EmptyPrompt,      // the prompt is empty (or tokenizes to nothing)
    NotFound,         // STOP / CANCEL for an id that is not in flight
    Cancelled,        // acknowledgement of CANCEL
    ContextExceeded,  // prompt (+ max_tokens) does not fit the context
    AudioMismatch,    // DMel frames ≠ <|audio|> placeholders, or bad frame bytes
    NotSupported,     // the model cannot serve this (no tokenizer, no audio tower)
    Overloaded,       // no capacity (queue full) — retry later
    Internal,         // the engine failed while serving the request
};

std::string_view to_string(ErrorCode code);
std::optional<ErrorCode> error_code_from_string(std::string_view text);

}  // namespace inkling::protocol
