#include "gateway/generation_driver.h"

namespace inkling::gateway {

GenerationDriver::GenerationDriver(Formatter& formatter, DriverOptions options)
    : formatter_(formatter), options_(std::move(options)),
      splitter_(options_.start_in_content || !options_.message_output), stops_(options_.stop) {}

std::string GenerationDriver::accepted(const protocol::Accept& accept) {
    answer_.usage.prompt_tokens = accept.prompt_tokens;
    answer_.usage.cached_tokens = accept.reused.value_or(0);
    return options_.stream ? formatter_.stream_start(answer_.usage) : std::string();
}

std::string GenerationDriver::emit(Channel channel, const std::string& text) {
    if (text.empty()) return {};
    if (!options_.stream) {
        answer_.add(channel, text);
        return {};
    }
    return formatter_.stream_piece(channel, text);
}

std::string GenerationDriver::route(const OutputSplitter::Out& out) {
    std::string bytes = emit(Channel::Reasoning, out.reasoning);
    if (out.content.empty() || stops_.stopped()) return bytes;
    auto f = stops_.feed(out.content);
    bytes += emit(Channel::Content, f.text);
    if (f.stopped && !stop_sent_) stop_sent_ = stop_now_ = true;
    return bytes;
}

GenerationDriver::Step GenerationDriver::data(const std::string& token_bytes) {
    if (stops_.stopped()) return {};  // after STOP: drop what is in flight
    OutputSplitter::Out piece;
    if (options_.message_output) piece = splitter_.feed(token_bytes);
    else piece.content = token_bytes;
    Step step{route(piece), false};
    step.stop_engine = stop_now_;
    stop_now_ = false;
    return step;
}

GenerationDriver::End GenerationDriver::done(const protocol::DoneStats& stat) {
    End end;
    end.complete = true;
    if (options_.message_output) end.bytes = route(splitter_.flush());
    if (!stops_.stopped()) end.bytes += emit(Channel::Content, stops_.flush().text);
    answer_.usage.completion_tokens = stat.emitted;
    answer_.finish = stops_.stopped() ? Finish::StopSequence : stat.length_limited ? Finish::Length : Finish::EndOfTurn;
    if (options_.stream) end.bytes += formatter_.stream_end(answer_.finish, answer_.usage);
    else end.body = formatter_.body(answer_);
    return end;
}

GenerationDriver::End GenerationDriver::failed(const ApiError& error) {
    End end;
    if (options_.stream) end.bytes = formatter_.stream_error(error);
    else end.error = error;
    return end;
}

ApiError engine_refusal(const protocol::Error& e) {
    using protocol::ErrorCode;
    switch (e.code) {
    case ErrorCode::ContextExceeded:
        return ApiError(400, "invalid_request_error", "This model's context cannot hold the prompt (" + e.detail + ")",
                        "messages", "context_length_exceeded");
    case ErrorCode::BadRequest:
    case ErrorCode::EmptyPrompt:
    case ErrorCode::AudioMismatch:
    case ErrorCode::NotSupported:
        return ApiError(400, "invalid_request_error", std::string(protocol::to_string(e.code)) + ": " + e.detail);
    case ErrorCode::SlotBusy:
    case ErrorCode::Overloaded:
        return ApiError(429, "rate_limit_error", "the engine is busy; retry", "", "engine_busy", 1);
    default:
        return ApiError(500, "server_error",
                        "the engine failed the request: " + std::string(protocol::to_string(e.code)) +
                            (e.detail.empty() ? "" : " " + e.detail),
                        "", "engine_error");
    }
}

ApiError generation_failure(const std::string& why, const std::string& code) {
    return ApiError(503, "server_error", "generation failed: " + why, "", code, 1);
}

}  // namespace inkling::gateway
