#include "gateway/generation/generation_driver.h"

#include <algorithm>
#include <charconv>

#include "protocol/text/output_splitter.h"

namespace inkling::gateway {

DriverOptions driver_options(const GenerationRequest& g, bool message_output) {
    return {.stream = g.stream,
            .message_output = message_output,
            .start_in_content = g.start_in_content,
            .stop = g.stop,
            .calls = message_output && g.tools.callable(),
            .parallel_calls = g.tools.parallel,
            .logprobs = g.logprobs};
}

GenerationDriver::GenerationDriver(Formatter& formatter, DriverOptions options)
    : formatter_(formatter),
      options_(std::move(options)),
      parser_({.start = options_.start_in_content || !options_.message_output ? Channel::Content : Channel::Reasoning,
               .calls = options_.calls}),
      stops_(options_.stop) {}

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

void GenerationDriver::stop_engine() {
    if (!stop_sent_) stop_sent_ = stop_now_ = true;
}

void GenerationDriver::release_logprobs(const std::string& passed) {
    if (!options_.logprobs) return;
    auto ready = logprobs_.passed(passed);
    if (ready.empty()) return;
    if (options_.stream) formatter_.token_logprobs(std::move(ready));
    else
        for (auto& t : ready) answer_.logprobs.push_back(std::move(t));
}

std::string GenerationDriver::content(const std::string& text) {
    if (text.empty() || stops_.stopped()) return {};
    auto f = stops_.feed(text);
    release_logprobs(f.text);
    std::string bytes = emit(Channel::Content, f.text);
    if (f.stopped && !stop_sent_) {
        stop_engine();
        formatter_.stop_matched(stops_.matched());
    }
    return bytes;
}

std::string GenerationDriver::route(std::vector<ToolCallParser::Event>& events) {
    using Kind = ToolCallParser::Event::Kind;
    if (options_.logprobs) {
        std::size_t answer = 0;
        bool other = false;
        for (const auto& e : events) {
            if (e.kind == Kind::Text && e.channel == Channel::Content) answer += e.text.size();
            else other = true;
        }
        logprobs_.produced(answer, other);
    }
    std::string bytes;
    for (auto& e : events) {
        if (stops_.stopped() || calls_closed_) break;  // nothing after the end reaches the client
        switch (e.kind) {
        case Kind::Text:
            bytes += e.channel == Channel::Content ? content(e.text) : emit(e.channel, e.text);
            break;
        case Kind::CallStart:
            if (options_.stream) bytes += formatter_.stream_call_start(e.call, e.text);
            else answer_.add_call(e.call, std::move(e.text));
            break;
        case Kind::CallArguments:
            if (options_.stream) bytes += formatter_.stream_call_arguments(e.call, e.text);
            else answer_.add_arguments(e.call, e.text);
            break;
        case Kind::CallEnd:
            if (options_.stream) bytes += formatter_.stream_call_end(e.call);
            if (!options_.parallel_calls) {
                calls_closed_ = true;
                stop_engine();
            }
            break;
        }
    }
    return bytes;
}

namespace {
// The engine's tail in answer terms: alternatives most likely first (the wire leaves them
// unsorted), with the bytes data_logprobs sends.
TokenLogprob entry_of(const std::string& bytes, const protocol::TokenLogprobs& lp, std::uint32_t top) {
    TokenLogprob t{.bytes = bytes, .logprob = lp.logprob, .top = {}, .text_offset = 0};
    for (std::size_t i = 0; i < lp.top.size(); ++i)
        t.top.push_back({i < lp.top_bytes.size() ? lp.top_bytes[i] : std::string(), lp.top[i].second});
    std::stable_sort(t.top.begin(), t.top.end(), [](const auto& a, const auto& b) { return a.logprob > b.logprob; });
    if (t.top.size() > top) t.top.resize(top);
    return t;
}
}  // namespace

GenerationDriver::Step GenerationDriver::data(const std::string& token_bytes,
                                              const std::optional<protocol::TokenLogprobs>& logprobs) {
    if (stops_.stopped() || calls_closed_) return {};  // after STOP: drop what is in flight
    if (options_.logprobs && logprobs)
        logprobs_.add(entry_of(token_bytes, *logprobs, *options_.logprobs),
                      options_.message_output && protocol::text::is_marker(token_bytes));
    std::vector<ToolCallParser::Event> events;
    if (options_.message_output) parser_.feed(token_bytes, events);
    else if (!token_bytes.empty()) events.push_back({ToolCallParser::Event::Kind::Text, Channel::Content, 0, token_bytes});
    Step step{route(events), false};
    step.stop_engine = stop_now_;
    stop_now_ = false;
    return step;
}

GenerationDriver::End GenerationDriver::done(const protocol::DoneStats& stat) {
    End end;
    end.complete = true;
    if (options_.message_output && !stops_.stopped() && !calls_closed_) {
        std::vector<ToolCallParser::Event> events;
        parser_.finish(events);
        end.bytes = route(events);
    }
    if (!stops_.stopped()) {
        const std::string held = stops_.flush().text;
        release_logprobs(held);
        end.bytes += emit(Channel::Content, held);
    }
    answer_.usage.completion_tokens = stat.emitted;
    const bool called = parser_.calls_started() > 0;
    answer_.finish = stops_.stopped()                      ? Finish::StopSequence
                     : calls_closed_                       ? Finish::ToolCalls
                     : stat.length_limited                 ? Finish::Length
                     : called                              ? Finish::ToolCalls
                                                           : Finish::EndOfTurn;
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
        return bad_request("This model's context cannot hold the prompt (" + e.detail + ")", "messages",
                           "context_length_exceeded");
    case ErrorCode::BadRequest:
    case ErrorCode::EmptyPrompt:
    case ErrorCode::AudioMismatch:
    case ErrorCode::NotSupported:
        return bad_request(std::string(protocol::to_string(e.code)) + ": " + e.detail);
    case ErrorCode::SlotBusy:
    case ErrorCode::Overloaded:
        return rate_limited("the engine is busy; retry", "engine_busy");
    default:
        return server_error("the engine failed the request: " + std::string(protocol::to_string(e.code)) +
                                (e.detail.empty() ? "" : " " + e.detail),
                            "engine_error");
    }
}

std::optional<std::uint64_t> context_exceeded_prompt_tokens(const protocol::Error& e) {
    static constexpr std::string_view kKey = "prompt_tokens=";
    if (e.code != protocol::ErrorCode::ContextExceeded || !e.detail.starts_with(kKey)) return std::nullopt;
    const std::string_view digits = std::string_view(e.detail).substr(kKey.size());
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end == digits.data() || (end != digits.data() + digits.size() && *end != ' '))
        return std::nullopt;
    return n;
}

ApiError generation_failure(const std::string& why, const std::string& code) {
    return unavailable("generation failed: " + why, code, 1);
}

}  // namespace inkling::gateway
