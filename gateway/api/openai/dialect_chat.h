// POST /v1/chat/completions: OpenAI chat. The stream opens with the assistant's role,
// reasoning streams as `reasoning_content` deltas beside `content`, tool calls as
// `tool_calls` deltas (index, id and name first, then argument fragments), log-probs as each
// chunk's `logprobs.content`; the body carries one `message` (`tool_calls`, content null when
// the turn only called) and `finish_reason` "tool_calls" when the model called.
#pragma once

#include "gateway/api/dialect.h"

namespace inkling::gateway {

const Dialect& chat_dialect();

}  // namespace inkling::gateway
