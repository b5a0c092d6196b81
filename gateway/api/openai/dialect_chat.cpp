#include "gateway/api/openai/dialect_chat.h"

#include "gateway/api/openai/openai_format.h"
#include "gateway/api/openai/openai_request.h"

namespace inkling::gateway {
namespace {

using nlohmann::json;

// One token's entry of `logprobs.content` (OpenAI's Chat Completions reference; docs/gateway.md).
json logprob_entry(const TokenLogprob& t) {
    json top = json::array();
    for (const auto& a : t.top)
        top.push_back({{"token", openai_token_text(a.bytes)}, {"logprob", openai_logprob(a.logprob)}, {"bytes", byte_array(a.bytes)}});
    return {{"token", openai_token_text(t.bytes)},
            {"logprob", openai_logprob(t.logprob)},
            {"bytes", byte_array(t.bytes)},
            {"top_logprobs", std::move(top)}};
}

json logprobs_object(const std::vector<TokenLogprob>& tokens) {
    json content = json::array();
    for (const auto& t : tokens) content.push_back(logprob_entry(t));
    return {{"content", std::move(content)}, {"refusal", nullptr}};
}

class ChatFormatter : public OpenAiFormatter {
public:
    ChatFormatter(ResponseMeta meta, const GenerationRequest& request)
        : OpenAiFormatter(std::move(meta), "chat.completion.chunk", request.include_usage),
          logprobs_(request.logprobs.has_value()) {}

    std::string stream_start(const Usage&) override {
        json role = json::object();
        role["index"] = 0;
        role["delta"]["role"] = "assistant";
        role["delta"]["content"] = "";
        role["finish_reason"] = nullptr;
        return chunk(std::move(role));
    }

    std::string stream_piece(Channel channel, std::string_view text) override {
        if (text.empty()) return {};
        json choice = {{"index", 0}, {"finish_reason", nullptr}};
        choice["delta"] = {{channel == Channel::Reasoning ? "reasoning_content" : "content", text}};
        if (channel == Channel::Content) attach_logprobs(choice);
        return chunk(std::move(choice));
    }

    // A call's first delta names it (index, id, type, name, empty arguments); the later ones
    // carry argument fragments only, as OpenAI streams them (openai-node's ChatCompletionStream
    // assembles them so).
    std::string stream_call_start(std::size_t index, std::string_view name) override {
        json call = {{"index", index},
                     {"id", call_id(index)},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", ""}}}};
        return chunk({{"index", 0}, {"finish_reason", nullptr}, {"delta", {{"tool_calls", json::array({std::move(call)})}}}});
    }

    std::string stream_call_arguments(std::size_t index, std::string_view fragment) override {
        if (fragment.empty()) return {};
        json call = {{"index", index}, {"function", {{"arguments", fragment}}}};
        return chunk({{"index", 0}, {"finish_reason", nullptr}, {"delta", {{"tool_calls", json::array({std::move(call)})}}}});
    }

    std::string stream_call_end(std::size_t) override { return {}; }

    void token_logprobs(std::vector<TokenLogprob> tokens) override {
        for (auto& t : tokens) pending_.push_back(std::move(t));
    }

    std::string stream_end(Finish finish, const Usage& usage) override {
        json last = {{"index", 0}, {"finish_reason", openai_finish_reason(finish)}};
        last["delta"] = json::object();
        attach_logprobs(last);
        return finish_stream(std::move(last), usage);
    }

    json body(const Answer& answer) const override {
        const std::vector<ToolCall> calls = answer.calls();
        const std::string content = answer.text(Channel::Content);
        json message = {{"role", "assistant"}, {"content", content}};
        if (!calls.empty()) {
            if (content.empty()) message["content"] = nullptr;  // a turn of calls only
            json list = json::array();
            for (const auto& c : calls)
                list.push_back({{"id", call_id(c.index)},
                                {"type", "function"},
                                {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
            message["tool_calls"] = std::move(list);
        }
        const std::string reasoning = answer.text(Channel::Reasoning);
        if (!reasoning.empty()) message["reasoning_content"] = reasoning;
        const json choice = {{"index", 0},
                             {"message", std::move(message)},
                             {"finish_reason", openai_finish_reason(answer.finish)},
                             {"logprobs", logprobs_ ? logprobs_object(answer.logprobs) : json(nullptr)}};
        return whole("chat.completion", choice, answer.usage);
    }

private:
    // call_<the response's hex>_<index>: unique per call, so a tool result names one.
    std::string call_id(std::size_t index) const {
        const std::string& id = meta().id;
        return "call_" + id.substr(id.find('-') + 1) + "_" + std::to_string(index);
    }
    // The log-probs of the tokens this chunk's text completes (the SDK concatenates them).
    void attach_logprobs(json& choice) {
        if (!logprobs_) return;
        if (pending_.empty()) {
            choice["logprobs"] = nullptr;
            return;
        }
        choice["logprobs"] = logprobs_object(pending_);
        pending_.clear();
    }

    bool logprobs_;
    std::vector<TokenLogprob> pending_;
};

std::unique_ptr<Formatter> make(const GenerationRequest& request, ResponseMeta meta) {
    return std::make_unique<ChatFormatter>(std::move(meta), request);
}

constexpr Dialect kChat{
    .endpoint = "chat",
    .id_prefix = "chatcmpl-",
    .prompt_param = "messages",
    .message_output = true,
    .parse = parse_chat_request,
    .make = make,
    .error_body = openai_error_body,
};

}  // namespace

const Dialect& chat_dialect() { return kChat; }

}  // namespace inkling::gateway
