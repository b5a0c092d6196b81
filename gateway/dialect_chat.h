// POST /v1/chat/completions: OpenAI chat. The stream opens with the assistant's role,
// reasoning streams as `reasoning_content` deltas beside `content`, and the body carries
// one `message`.
#pragma once

#include "gateway/dialect.h"

namespace inkling::gateway {

const Dialect& chat_dialect();

}  // namespace inkling::gateway
