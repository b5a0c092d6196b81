#include "gateway/api/openai/openai_format.h"

#include <algorithm>
#include <cmath>

#include "protocol/text/utf8_release.h"

namespace inkling::gateway {

using nlohmann::json;

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_data(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

const char* openai_finish_reason(Finish finish) {
    switch (finish) {
    case Finish::Length: return "length";
    case Finish::ToolCalls: return "tool_calls";
    case Finish::EndOfTurn:
    case Finish::StopSequence: break;
    }
    return "stop";
}

std::string openai_token_text(const std::string& bytes) {
    std::string pending = bytes;
    if (protocol::text::take_utf8(pending, false) == bytes && pending.empty()) return bytes;
    static const char* hex = "0123456789abcdef";
    std::string out = "bytes:";
    for (unsigned char b : bytes) out += {'\\', 'x', hex[b >> 4], hex[b & 15]};
    return out;
}

double openai_logprob(double logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

json byte_array(const std::string& bytes) {
    json a = json::array();
    for (unsigned char b : bytes) a.push_back(static_cast<int>(b));
    return a;
}

json openai_usage(const Usage& usage) {
    // prompt_tokens_details.cached_tokens, as OpenAI's: the prompt tokens the engine took from
    // the slot's prefix (ACCEPT reused=) instead of prefilling them.
    return {{"prompt_tokens", usage.prompt_tokens},
            {"completion_tokens", usage.completion_tokens},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", std::min(usage.cached_tokens, usage.prompt_tokens)}}}};
}

json openai_error_body(const ApiError& error) { return error.body(); }

std::string OpenAiFormatter::stream_error(const ApiError& error) {
    return sse_data(openai_error_body(error)) + std::string(kSseDone);
}

std::string OpenAiFormatter::chunk(json choice) const {
    json j = {{"id", meta_.id}, {"object", chunk_object_}, {"created", meta_.created}, {"model", meta_.model}};
    j["choices"] = json::array({std::move(choice)});
    return sse_data(j);
}

std::string OpenAiFormatter::finish_stream(json last_choice, const Usage& usage) const {
    std::string bytes = chunk(std::move(last_choice));
    if (include_usage_) {
        const json j = {{"id", meta_.id},       {"object", chunk_object_},       {"created", meta_.created},
                        {"model", meta_.model}, {"choices", json::array()}, {"usage", openai_usage(usage)}};
        bytes += sse_data(j);
    }
    return bytes + std::string(kSseDone);
}

json OpenAiFormatter::whole(const char* object, json choice, const Usage& usage) const {
    json body = {{"id", meta_.id}, {"created", meta_.created}, {"model", meta_.model}, {"usage", openai_usage(usage)}};
    body["object"] = object;
    body["choices"] = json::array({std::move(choice)});
    return body;
}

}  // namespace inkling::gateway
