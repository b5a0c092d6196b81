// Anthropic Messages API request bodies (POST /v1/messages, /v1/messages/count_tokens) →
// a GenerationRequest: the TMLv0 prompt (protocol/tml_render.h), sampling settings, stop
// sequences, the thinking effort. Every problem is an ApiError 400 whose message names the
// field or block (messages[2].content[0]: …); what the server cannot do is refused, never
// dropped (images, tools, structured outputs, unknown fields). docs/gateway.md has the table.
//
//   GenerationRequest g = parse_messages_request(body, limits);      // create
//   GenerationRequest c = parse_count_tokens_request(body, limits);  // the same prompt, count_only
//
// Both render a conversation to the same prompt, so count_tokens counts exactly what a
// create with the same messages, system and thinking would send.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "gateway/api/dialect.h"
#include "gateway/generation/generation_request.h"

namespace inkling::gateway {

GenerationRequest parse_messages_request(const nlohmann::json& body, const GatewayLimits& limits);
GenerationRequest parse_count_tokens_request(const nlohmann::json& body, const GatewayLimits& limits);

// `thinking: {type: "enabled", budget_tokens: N}` as Inkling's thinking effort (TMLv0's
// "Thinking effort level", docs/model.md "Thinking effort"): the budget is a
// hint, not a cap (max_tokens bounds thinking and answer together, as in Anthropic's API).
//   N < 4000: low (0.2); < 16000: medium (0.7); < 32000: high (0.9); else max (0.99).
double effort_for_budget(std::uint64_t budget_tokens);
// `thinking: {type: "adaptive"}`: the model's own default, high (0.9, docs/model.md).
inline constexpr double kAdaptiveEffort = 0.9;

}  // namespace inkling::gateway
