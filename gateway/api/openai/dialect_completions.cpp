#include "gateway/api/openai/dialect_completions.h"

#include <map>

#include "gateway/api/openai/openai_format.h"
#include "gateway/api/openai/openai_request.h"

namespace inkling::gateway {
namespace {

using nlohmann::json;

// The legacy shape (OpenAI's Completions reference): parallel arrays, and per position a
// map of up to logprobs + 1 entries, the alternatives and the chosen token.
json logprobs_object(const std::vector<TokenLogprob>& tokens) {
    json text = json::array(), values = json::array(), top = json::array(), offsets = json::array();
    for (const auto& t : tokens) {
        const std::string chosen = openai_token_text(t.bytes);
        text.push_back(chosen);
        values.push_back(openai_logprob(t.logprob));
        std::map<std::string, double> position;  // two ids can share one text: the likelier
        for (const auto& a : t.top) position.emplace(openai_token_text(a.bytes), openai_logprob(a.logprob));
        position.emplace(chosen, openai_logprob(t.logprob));
        top.push_back(position);
        offsets.push_back(t.text_offset);
    }
    return {{"tokens", std::move(text)}, {"token_logprobs", std::move(values)}, {"top_logprobs", std::move(top)},
            {"text_offset", std::move(offsets)}};
}

class CompletionsFormatter : public OpenAiFormatter {
public:
    CompletionsFormatter(ResponseMeta meta, const GenerationRequest& request)
        : OpenAiFormatter(std::move(meta), "text_completion", request.include_usage), logprobs_(request.logprobs.has_value()) {}

    std::string stream_start(const Usage&) override { return {}; }

    // Raw output has one channel; a reasoning piece (none today) would be text all the same.
    std::string stream_piece(Channel, std::string_view text) override {
        if (text.empty()) return {};
        return chunk({{"index", 0}, {"finish_reason", nullptr}, {"text", text}, {"logprobs", take_logprobs()}});
    }

    void token_logprobs(std::vector<TokenLogprob> tokens) override {
        for (auto& t : tokens) pending_.push_back(std::move(t));
    }

    std::string stream_end(Finish finish, const Usage& usage) override {
        return finish_stream({{"index", 0}, {"finish_reason", openai_finish_reason(finish)}, {"text", ""}, {"logprobs", take_logprobs()}},
                             usage);
    }

    json body(const Answer& answer) const override {
        std::string text;
        for (const auto& b : answer.blocks) text += b.text;
        const json choice = {{"index", 0},
                             {"text", text},
                             {"finish_reason", openai_finish_reason(answer.finish)},
                             {"logprobs", logprobs_ ? logprobs_object(answer.logprobs) : json(nullptr)}};
        return whole("text_completion", choice, answer.usage);
    }

private:
    // The tokens this chunk's text completes; null when none were asked for or none are due.
    json take_logprobs() {
        if (!logprobs_ || pending_.empty()) return nullptr;
        json j = logprobs_object(pending_);
        pending_.clear();
        return j;
    }

    bool logprobs_;
    std::vector<TokenLogprob> pending_;
};

std::unique_ptr<Formatter> make(const GenerationRequest& request, ResponseMeta meta) {
    return std::make_unique<CompletionsFormatter>(std::move(meta), request);
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
