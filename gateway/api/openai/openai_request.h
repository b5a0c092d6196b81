// OpenAI request bodies → what the engine needs: the rendered TMLv0 prompt (chat) or the
// raw prompt (completions), DMel bytes for audio parts, sampling settings, stop
// sequences. Every problem is an ApiError naming the field. GenerationRequest is every
// dialect's (gateway/api/anthropic/anthropic_request.h fills it for the Messages API).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/api/openai/response_format.h"
#include "gateway/generation/tool_use.h"

namespace inkling::gateway {

struct GatewayLimits {
    std::vector<std::string> model_ids;   // the models served: a request's `model` must be one
    std::uint64_t max_tokens_cap = 4096;  // clamp for max_tokens (and the default)
    bool dmel_boost = true;               // the quiet-clip RMS boost (off = transformers exactly)
    std::size_t max_audio_seconds = 600;
};

struct GenerationRequest {
    std::string model;                // which of GatewayLimits::model_ids
    bool chat = true;
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
    // Chat's response_format (response_format.h): the answer's JSON, part of `constraint`.
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

// JSON nests at most this deep (arrays and objects): 32 MiB of '[' would otherwise cost
// gigabytes of parser state and DOM.
inline constexpr std::size_t kMaxJsonDepth = 64;
// and holds at most this many values: each costs up to ~100 bytes of DOM, so 32 MiB of
// "{}," (11 million objects) took 1 GiB; at this cap the DOM stays under ~30 MB.
inline constexpr std::size_t kMaxJsonValues = 262144;

// A request body → JSON. Throws ApiError 400 for a body nested deeper than `max_depth` or
// holding more than `max_values` values (both counted by one scan before the parser runs),
// or one that is not JSON.
nlohmann::json parse_body(std::string_view text, std::size_t max_depth = kMaxJsonDepth,
                          std::size_t max_values = kMaxJsonValues);

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
