#include "gateway/api/anthropic/dialect_messages.h"

#include <algorithm>
#include <stdexcept>

#include "gateway/api/anthropic/anthropic_format.h"
#include "gateway/api/anthropic/anthropic_request.h"

namespace inkling::gateway {
namespace {

using nlohmann::json;

// With thinking display "omitted" the thinking text is not sent; a ping every this many
// reasoning pieces shows the client the stream is alive meanwhile.
constexpr unsigned kPingEvery = 32;

json usage_json(const Usage& u) {
    const std::uint64_t cached = std::min(u.cached_tokens, u.prompt_tokens);
    return {{"input_tokens", u.prompt_tokens - cached},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", cached},
            {"output_tokens", u.completion_tokens}};
}

// A call's input: the arguments the model wrote, parsed. Without constrained decoding a model
// can write JSON that does not parse: then the text itself (the SDK types input as unknown),
// never a made-up {}.
json call_input(const std::string& arguments) {
    json input = json::parse(arguments, nullptr, false);
    return input.is_discarded() ? json(arguments) : input;
}

json empty_block(Channel channel) {
    if (channel == Channel::Reasoning) return {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    return {{"type", "text"}, {"text", ""}};
}

class MessagesFormatter : public Formatter {
public:
    MessagesFormatter(ResponseMeta meta, std::uint64_t max_tokens, bool omit_reasoning)
        : meta_(std::move(meta)), max_tokens_(max_tokens), omit_reasoning_(omit_reasoning) {}

    std::string stream_start(const Usage& usage) override {
        json message = envelope();
        message["content"] = json::array();
        message["stop_reason"] = nullptr;
        message["stop_sequence"] = nullptr;
        message["usage"] = usage_json(usage);
        return sse_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
               sse_event("ping", {{"type", "ping"}});
    }

    std::string stream_piece(Channel channel, std::string_view text) override {
        if (text.empty()) return {};
        std::string out;
        if (!open_ || channel_ != channel) {
            out += close_block();
            out += sse_event("content_block_start",
                             {{"type", "content_block_start"}, {"index", index_}, {"content_block", empty_block(channel)}});
            open_ = true;
            channel_ = channel;
        }
        if (channel == Channel::Reasoning && omit_reasoning_) {
            if (++omitted_ % kPingEvery == 0) out += sse_event("ping", {{"type", "ping"}});
            return out;
        }
        const json delta = channel == Channel::Reasoning ? json{{"type", "thinking_delta"}, {"thinking", text}}
                                                         : json{{"type", "text_delta"}, {"text", text}};
        return out + sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
    }

    // A tool_use block: its start names the call (input {}), input_json_delta events carry
    // the arguments' JSON text in fragments (the SDK joins and parses them), its stop ends it.
    std::string stream_call_start(std::size_t index, std::string_view name) override {
        std::string out = close_block();
        out += sse_event("content_block_start",
                         {{"type", "content_block_start"},
                          {"index", index_},
                          {"content_block", {{"type", "tool_use"}, {"id", call_id(index)}, {"name", name}, {"input", json::object()}}}});
        return out;
    }

    std::string stream_call_arguments(std::size_t, std::string_view fragment) override {
        if (fragment.empty()) return {};
        return sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                 {"index", index_},
                                                 {"delta", {{"type", "input_json_delta"}, {"partial_json", fragment}}}});
    }

    std::string stream_call_end(std::size_t) override {
        return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}});
    }

    std::string stream_end(Finish finish, const Usage& usage) override {
        json delta = {{"stop_reason", stop_reason(finish, usage)}, {"stop_sequence", stop_sequence(finish)}};
        return close_block() +
               sse_event("message_delta", {{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", usage_json(usage)}}) +
               sse_event("message_stop", {{"type", "message_stop"}});
    }

    std::string stream_error(const ApiError& error) override {
        // The SDK raises it as an APIError; no message_stop follows, so the stream's end
        // cannot be taken for a complete message.
        return sse_event("error", anthropic_error_body(error));
    }

    json body(const Answer& answer) const override {
        json message = envelope();
        json content = json::array();
        for (const auto& b : answer.blocks) {
            if (b.call) {
                content.push_back({{"type", "tool_use"},
                                   {"id", call_id(b.call->index)},
                                   {"name", b.call->name},
                                   {"input", call_input(b.call->arguments)}});
                continue;
            }
            json block = empty_block(b.channel);
            block[b.channel == Channel::Reasoning ? "thinking" : "text"] =
                b.channel == Channel::Reasoning && omit_reasoning_ ? std::string() : b.text;
            content.push_back(std::move(block));
        }
        message["content"] = std::move(content);
        message["stop_reason"] = stop_reason(answer.finish, answer.usage);
        message["stop_sequence"] = stop_sequence(answer.finish);
        message["usage"] = usage_json(answer.usage);
        return message;
    }

    void stop_matched(std::string_view sequence) override { matched_ = sequence; }

private:
    // toolu_<the message's hex>_<index>: unique per call, so a tool_result names one.
    std::string call_id(std::size_t index) const {
        return "toolu_" + meta_.id.substr(meta_.id.find('_') + 1) + "_" + std::to_string(index);
    }

    json envelope() const {
        return {{"id", meta_.id}, {"type", "message"}, {"role", "assistant"}, {"model", meta_.model}};
    }

    // A thinking block ends with its signature (always "": this server does not sign).
    std::string close_block() {
        if (!open_) return {};
        std::string out;
        if (channel_ == Channel::Reasoning)
            out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                     {"index", index_},
                                                     {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
        out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
        open_ = false;
        ++index_;
        return out;
    }

    const char* stop_reason(Finish finish, const Usage& usage) const {
        switch (finish) {
        case Finish::StopSequence: return "stop_sequence";
        case Finish::ToolCalls: return "tool_use";
        // Length-limited before max_tokens: the engine's context room ran out.
        case Finish::Length: return usage.completion_tokens < max_tokens_ ? "model_context_window_exceeded" : "max_tokens";
        case Finish::EndOfTurn: break;
        }
        return "end_turn";
    }

    json stop_sequence(Finish finish) const {
        return finish == Finish::StopSequence ? json(matched_) : json(nullptr);
    }

    ResponseMeta meta_;
    std::uint64_t max_tokens_;
    bool omit_reasoning_;
    bool open_ = false;  // a text or thinking block is open (streaming); a call's block is
                         // closed by its stream_call_end
    Channel channel_ = Channel::Content;
    unsigned index_ = 0, omitted_ = 0;
    std::string matched_;
};

// count_tokens: no answer is generated, only the engine's count.
class CountFormatter : public Formatter {
public:
    std::string stream_start(const Usage&) override { throw std::logic_error("count_tokens does not stream"); }
    std::string stream_piece(Channel, std::string_view) override { throw std::logic_error("count_tokens does not stream"); }
    std::string stream_end(Finish, const Usage&) override { throw std::logic_error("count_tokens does not stream"); }
    std::string stream_error(const ApiError&) override { throw std::logic_error("count_tokens does not stream"); }
    json body(const Answer& answer) const override { return {{"input_tokens", answer.usage.prompt_tokens}}; }
};

std::unique_ptr<Formatter> make_messages(const GenerationRequest& request, ResponseMeta meta) {
    return std::make_unique<MessagesFormatter>(std::move(meta), request.max_tokens, request.omit_reasoning);
}

std::unique_ptr<Formatter> make_count(const GenerationRequest&, ResponseMeta) { return std::make_unique<CountFormatter>(); }

constexpr Dialect kMessages{
    .endpoint = "messages",
    .id_prefix = "msg_",
    .prompt_param = "messages",
    .message_output = true,
    .parse = parse_messages_request,
    .make = make_messages,
    .error_body = anthropic_error_body,
    .error_status = anthropic_status,
};

constexpr Dialect kCountTokens{
    .endpoint = "count_tokens",
    .id_prefix = "count_",
    .prompt_param = "messages",
    .message_output = true,
    .parse = parse_count_tokens_request,
    .make = make_count,
    .error_body = anthropic_error_body,
    .error_status = anthropic_status,
};

}  // namespace

const Dialect& messages_dialect() { return kMessages; }
const Dialect& count_tokens_dialect() { return kCountTokens; }

}  // namespace inkling::gateway
