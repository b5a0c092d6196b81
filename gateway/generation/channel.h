// Which part of the model's message a piece of text belongs to, in no API dialect's words:
// the answer, or the reasoning (<|content_thinking|>). Tool calls are not a channel but
// their own events (gateway/generation/tool_calls.h), since a call has a name and an index
// besides text.
#pragma once

namespace inkling::gateway {

enum class Channel { Content, Reasoning };

}  // namespace inkling::gateway
