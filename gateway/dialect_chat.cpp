#include "gateway/dialect_chat.h"

#include "gateway/openai_format.h"

namespace inkling::gateway {
namespace {

using nlohmann::json;

class ChatFormatter : public OpenAiFormatter {
public:
    ChatFormatter(ResponseMeta meta, bool include_usage)
        : OpenAiFormatter(std::move(meta), "chat.completion.chunk", include_usage) {}

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
        return chunk(std::move(choice));
    }

    std::string stream_end(Finish finish, const Usage& usage) override {
        json last = {{"index", 0}, {"finish_reason", openai_finish_reason(finish)}};
        last["delta"] = json::object();
        return finish_stream(std::move(last), usage);
    }

    json body(const Answer& answer) const override {
        json message = {{"role", "assistant"}, {"content", answer.text(Channel::Content)}};
        const std::string reasoning = answer.text(Channel::Reasoning);
        if (!reasoning.empty()) message["reasoning_content"] = reasoning;
        const json choice = {{"index", 0},
                             {"message", std::move(message)},
                             {"finish_reason", openai_finish_reason(answer.finish)},
                             {"logprobs", nullptr}};
        return whole("chat.completion", choice, answer.usage);
    }
};

std::unique_ptr<Formatter> make(const GenerationRequest& request, ResponseMeta meta) {
    return std::make_unique<ChatFormatter>(std::move(meta), request.include_usage);
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
