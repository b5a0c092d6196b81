#include "gateway/dialect_completions.h"

#include "gateway/openai_format.h"

namespace inkling::gateway {
namespace {

using nlohmann::json;

class CompletionsFormatter : public OpenAiFormatter {
public:
    CompletionsFormatter(ResponseMeta meta, bool include_usage)
        : OpenAiFormatter(std::move(meta), "text_completion", include_usage) {}

    std::string stream_start(const Usage&) override { return {}; }

    // Raw output has one channel; a reasoning piece (none today) would be text all the same.
    std::string stream_piece(Channel, std::string_view text) override {
        if (text.empty()) return {};
        return chunk({{"index", 0}, {"finish_reason", nullptr}, {"text", text}, {"logprobs", nullptr}});
    }

    std::string stream_end(Finish finish, const Usage& usage) override {
        return finish_stream({{"index", 0}, {"finish_reason", openai_finish_reason(finish)}, {"text", ""}, {"logprobs", nullptr}},
                             usage);
    }

    json body(const Answer& answer) const override {
        std::string text;
        for (const auto& b : answer.blocks) text += b.text;
        const json choice = {
            {"index", 0}, {"text", text}, {"finish_reason", openai_finish_reason(answer.finish)}, {"logprobs", nullptr}};
        return whole("text_completion", choice, answer.usage);
    }
};

std::unique_ptr<Formatter> make(const GenerationRequest& request, ResponseMeta meta) {
    return std::make_unique<CompletionsFormatter>(std::move(meta), request.include_usage);
}

constexpr Dialect kCompletions{
    .endpoint = "completions",
    .id_prefix = "cmpl-",
    .prompt_param = "prompt",
    .message_output = false,
    .parse = parse_completion_request,
    .make = make,
    .error_body = openai_error_body,
};

}  // namespace

const Dialect& completions_dialect() { return kCompletions; }

}  // namespace inkling::gateway
