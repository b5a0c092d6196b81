// One generation request in no API dialect's words: what every dialect's parser fills
// (gateway/api/openai/openai_request.h for chat and completions,
// gateway/api/anthropic/anthropic_request.h for the Messages API) and what the generation
// reads (Server::generate, GenerationDriver): the rendered prompt and audio, the sampling
// settings, stops, tools, log-probs and the engine's constraint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/generation/tool_use.h"

namespace inkling::gateway {

// The answer's JSON format (OpenAI chat's response_format, parsed by
// gateway/api/openai/response_format.h), part of the engine's constraint.
struct ResponseFormat {
    enum class Kind { Text, JsonObject, JsonSchema };
    Kind kind = Kind::Text;
    std::string name;               // json_schema.name
    nlohmann::ordered_json schema;  // json_schema.schema
    bool strict = false;            // json_schema.strict: enforced either way (docs/gateway.md)
    bool json() const { return kind != Kind::Text; }
};

struct GenerationRequest {
    std::string model;                // which of GatewayLimits::model_ids
    bool stream = false;
    bool include_usage = false;
    std::string prompt;               // UTF-8 text the engine tokenizes
    std::string audio;                // DMel bytes, [frames][80]
    std::uint64_t max_tokens = 0;
    double temperature = 1.0;
    double top_p = 1.0;
    std::uint32_t top_k = 0;          // SUBMIT top_k (0: off); the Messages API's top_k
    std::optional<std::uint64_t> seed;
    std::vector<std::string> stop;
    bool start_in_content = true;     // text before any content-kind marker is the answer (effort 0)
    std::uint64_t affinity = 0;       // conversation key (AffinityMap::key_of): which slot keeps its prefix
    std::optional<int> slot_hint;     // explicit `cache_slot`
    std::string user;
    ToolUse tools = {};               // declared functions and tool_choice (#15)
    // Per generated token: its log-prob and this many alternatives (0..20; chat's
    // top_logprobs, completions' logprobs). nullopt: no log-probs asked for.
    std::optional<std::uint32_t> logprobs = std::nullopt;
    // The engine's constraint (SUBMIT grammar=N, PROTOCOL.md §12.3): the output must match it
    // (a forced tool choice, tool_constraint.h); "" for none.
    std::string constraint = {};
    // Chat's response_format: the answer's JSON, part of `constraint`.
    ResponseFormat format = {};
    // The Messages API's thinking display "omitted": thinking blocks are sent without their text.
    bool omit_reasoning = false;
    // POST /v1/messages/count_tokens: the engine counts the prompt (ACCEPT) and generates
    // nothing (the request is CANCELled at once); the answer is the count.
    bool count_only = false;
    // The conversation key the response names (x-conversation-key): the x-session-id it came
    // with, else the hex of `affinity`. Set by the HTTP side.
    std::string conversation_key = {};
};

}  // namespace inkling::gateway
