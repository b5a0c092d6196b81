// OpenAI request bodies → a GenerationRequest (gateway/generation/generation_request.h): the
// rendered TMLv0 prompt (chat) or the raw prompt (completions), DMel bytes for audio parts,
// sampling settings, stop sequences. Every problem is an ApiError naming the field.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/api/dialect.h"
#include "gateway/generation/generation_request.h"

namespace inkling::gateway {

GenerationRequest parse_chat_request(const nlohmann::json& body, const GatewayLimits& limits);
GenerationRequest parse_completion_request(const nlohmann::json& body, const GatewayLimits& limits);
// A json_schema response_format's schema with its keys in the order the client wrote them
// (the body's parser sorted them), read again from the raw body, and `constraint` rebuilt:
// OpenAI writes an answer's keys in the schema's order. Nothing for any other request.
void keep_declared_key_order(GenerationRequest& g, std::string_view raw_body);

// Standard base64 (protocol/text/base64.h) with or without padding; throws ApiError naming
// `param`.
std::string decode_base64(const std::string& text, const std::string& param);

}  // namespace inkling::gateway
