// POST /v1/completions: OpenAI's legacy completions. The prompt is raw text and so is the
// output: each choice carries `text` and `logprobs` (null unless asked for: then OpenAI's
// legacy tokens / token_logprobs / top_logprobs / text_offset arrays).
#pragma once

#include "gateway/api/dialect.h"

namespace inkling::gateway {

const Dialect& completions_dialect();

}  // namespace inkling::gateway
