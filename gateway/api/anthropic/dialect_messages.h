// POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages API as the
// official @anthropic-ai/sdk parses it (docs/gateway.md). The answer is a Message whose
// content blocks follow the model's output in order: a `thinking` block for each run of
// reasoning, a `text` block for each run of answer, a `tool_use` block for each call.
// Streaming, the same blocks as Anthropic's named SSE events:
//
//   message_start (content [], stop_reason null, usage.input_tokens), ping,
//   per block i = 0, 1, …: content_block_start, content_block_delta… (text_delta /
//     thinking_delta / input_json_delta; a thinking block ends with one signature_delta),
//     content_block_stop,
//   message_delta (stop_reason, stop_sequence, usage with output_tokens), message_stop;
//   a failure after the 200: an `error` event, and the stream ends.
//
// stop_reason: end_turn, tool_use, stop_sequence (stop_sequence names it), max_tokens, or
// model_context_window_exceeded when the context ran out before max_tokens. Usage:
// input_tokens are the prompt tokens the engine prefilled, cache_read_input_tokens those it
// reused from the slot (their sum is the prompt), cache_creation_input_tokens 0. This server
// does not sign thinking: signatures are "". count_tokens answers {"input_tokens": N}, the
// engine's own count of the prompt a create would send.
#pragma once

#include "gateway/api/dialect.h"

namespace inkling::gateway {

const Dialect& messages_dialect();
const Dialect& count_tokens_dialect();

}  // namespace inkling::gateway
