// Arbitrary HTTP bodies through the gateway's request path: parse_body (depth and value
// caps, JSON), then the chat or completion parser (the first byte picks), as the worker
// thread runs them. Only ApiError may escape, always a 4xx; an accepted request stays
// within the limits the engine will check again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"
#include "gateway/api/openai/openai_request.h"

namespace gw = inkling::gateway;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const bool chat = data[0] & 1;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    gw::GatewayLimits limits;
    limits.model_ids = {"m"};
    limits.max_tokens_cap = 64;
    limits.max_audio_seconds = 1;  // keeps audio parts cheap
    try {
        const auto j = gw::parse_body(body);
        const gw::GenerationRequest r = chat ? gw::parse_chat_request(j, limits) : gw::parse_completion_request(j, limits);
        if (r.max_tokens > limits.max_tokens_cap) std::abort();
        if (r.audio.size() % 80 != 0 || r.audio.size() / 80 > 20 * limits.max_audio_seconds) std::abort();
        if (r.stop.size() > 4) std::abort();
    } catch (const gw::ApiError& e) {
        if (e.status < 400 || e.status >= 500) std::abort();
    }
    return 0;
}
