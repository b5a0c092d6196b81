#include "protocol/error_code.h"

#include <array>
#include <utility>

namespace inkling::protocol {
namespace {

constexpr std::array<std::pair<ErrorCode, std::string_view>, 12> kNames{{
    {ErrorCode::BadFrame, "BAD_FRAME"},
    {ErrorCode::BadRequest, "BAD_REQUEST"},
    {ErrorCode::SlotBusy, "SLOT_BUSY"},
    {ErrorCode::DuplicateId, "DUPLICATE_ID"},
    {ErrorCode::EmptyPrompt, "EMPTY_PROMPT"},
    {ErrorCode::NotFound, "NOT_FOUND"},
    {ErrorCode::Cancelled, "CANCELLED"},
    {ErrorCode::ContextExceeded, "CONTEXT_EXCEEDED"},
    {ErrorCode::AudioMismatch, "AUDIO_MISMATCH"},
    {ErrorCode::NotSupported, "NOT_SUPPORTED"},
    {ErrorCode::Overloaded, "OVERLOADED"},
    {ErrorCode::Internal, "INTERNAL"},
}};

}  // namespace

std::string_view to_string(ErrorCode code) {
    for (const auto& [c, name] : kNames)
        if (c == code) return name;
    return "INTERNAL";
}

std::optional<ErrorCode> error_code_from_string(std::string_view text) {
    for (const auto& [c, name] : kNames)
        if (name == text) return c;
    return std::nullopt;
}

}  // namespace inkling::protocol
