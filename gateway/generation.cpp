// Server::generate — one OpenAI generation request from admission to the last byte:
// wait for a slot, submit to the engine (again, transparently, if the engine died before
// ACCEPT), commit HTTP 200 only on ACCEPT, stream or collect the answer through the
// channel splitter and the stop filter, and CANCEL when the client goes away.
#include <sys/socket.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "gateway/api_error.h"
#include "gateway/connection.h"
#include "gateway/output_splitter.h"
#include "gateway/server.h"
#include "gateway/stop_filter.h"
#include "protocol/fields.h"

namespace inkling::gateway {

using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Clock = std::chrono::steady_clock;

namespace {

std::string random_hex(std::size_t n) {
    static std::mt19937_64 rng{std::random_device{}()};
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += hex[rng() & 15];
    return s;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// An engine ERROR before ACCEPT as the API error a client should see.
ApiError engine_refusal(const protocol::Error& e) {
    using protocol::ErrorCode;
    switch (e.code) {
    case ErrorCode::ContextExceeded:
        return ApiError(400, "invalid_request_error",
                        "This model's context cannot hold the prompt (" + e.detail + ")", "messages", "context_length_exceeded");
    case ErrorCode::BadRequest:
    case ErrorCode::EmptyPrompt:
    case ErrorCode::AudioMismatch:
    case ErrorCode::NotSupported:
        return ApiError(400, "invalid_request_error", std::string(protocol::to_string(e.code)) + ": " + e.detail);
    case ErrorCode::SlotBusy:
    case ErrorCode::Overloaded:
        return ApiError(429, "rate_limit_error", "the engine is busy; retry", "", "engine_busy", 1);
    default:
        return ApiError(500, "server_error", "the engine failed the request: " + std::string(protocol::to_string(e.code)) +
                                                 (e.detail.empty() ? "" : " " + e.detail),
                        "", "engine_error");
    }
}

// Waits for the client to hang up (end of stream or an error on the socket); then wakes
// whatever the request is waiting on. Bytes that arrive meanwhile (a pipelined request, a
// stray CRLF) are moved into the connection's buffer for the next request and the watch
// goes on: it used to stop at the first byte. `done` is set when the request ends, before
// `hangup` goes away. A client pipelining more than 64 KiB is no longer read (nor watched).
awaitable<void> watch_disconnect(tcp::socket& socket, beast::flat_buffer& pending, std::function<void()>& hangup,
                                 std::shared_ptr<bool> done) {
    while (true) {
        boost::system::error_code ec;
        co_await socket.async_wait(tcp::socket::wait_read, asio::redirect_error(use_awaitable, ec));
        if (*done || ec == asio::error::operation_aborted) co_return;
        if (ec) {
            hangup();
            co_return;
        }
        if (pending.size() >= (64u << 10)) co_return;
        auto room = pending.prepare(4096);
        const ssize_t n = ::recv(socket.native_handle(), room.data(), room.size(), MSG_DONTWAIT);
        if (n > 0) {
            pending.commit(static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        hangup();
        co_return;
    }
}

}  // namespace

awaitable<void> Server::generate(Connection& c, const Request& req, GenerationRequest g, const std::string& endpoint) {
    const auto t0 = Clock::now();
    const std::string id = (g.chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
    const std::string object = g.chat ? "chat.completion.chunk" : "text_completion";
    const long created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ++active_requests_;
    struct Leave {
        int& n;
        ~Leave() { --n; }
    } leave{active_requests_};

    auto done_watching = std::make_shared<bool>(false);
    std::shared_ptr<RequestStream> waiting_on;  // the engine stream, once there is one
    std::function<void()> hangup = [&] {
        c.disconnected = true;
        c.wake->notify();
        if (waiting_on) waiting_on->wake();
    };
    asio::co_spawn(io_, watch_disconnect(c.stream.socket(), c.buffer, hangup, done_watching), asio::detached);
    struct StopWatching {
        std::shared_ptr<bool> done;
        tcp::socket& socket;
        ~StopWatching() {
            *done = true;
            boost::system::error_code ec;
            socket.cancel(ec);
        }
    } stop_watching{done_watching, c.stream.socket()};

    std::optional<ApiError> failure;
    // ---- admission --------------------------------------------------------------------
    int preferred = -1;
    if (g.slot_hint) {
        if (*g.slot_hint >= slots_.slots())
            failure = bad_request("'cache_slot' must be below " + std::to_string(slots_.slots()), "cache_slot");
        preferred = *g.slot_hint;
    } else if (auto known = affinity_.find(g.affinity)) {
        preferred = *known;
    } else {
        preferred = static_cast<int>(g.affinity % static_cast<std::uint64_t>(slots_.slots()));
    }
    int slot = -1;
    if (!failure) {
        auto r = co_await slots_.acquire(preferred, Clock::now() + o_.queue_timeout, c.disconnected, c.wake);
        metrics_.queue_wait.observe(seconds(Clock::now() - t0));
        if (r.outcome == SlotPool::Outcome::QueueFull)
            failure = ApiError(429, "rate_limit_error", "the queue is full; retry later", "", "queue_full", 1);
        else if (r.outcome == SlotPool::Outcome::TimedOut)
            failure = ApiError(429, "rate_limit_error", "timed out waiting for a slot", "", "queue_timeout", 1);
        else if (r.outcome == SlotPool::Outcome::Abandoned) {
            metrics_.client_cancels.inc();
            co_return;
        } else
            slot = r.slot;
    }
    struct Release {
        SlotPool& pool;
        int slot;
        ~Release() {
            if (slot >= 0) pool.release(slot);
        }
    } release{slots_, slot};

    // ---- submit, retrying while the engine dies before ACCEPT -------------------------
    std::shared_ptr<RequestStream> stream;
    protocol::Accept accept;
    for (int attempt = 0; !failure && !stream; ++attempt) {
        if (!co_await engine_.wait_ready(Clock::now() + o_.engine_wait)) {
            failure = ApiError(503, "server_error", "the engine is not available (" +
                                                        std::string(EngineSupervisor::state_name(engine_.state())) +
                                                        (engine_.reason().empty() ? "" : ": " + engine_.reason()) + ")",
                               "", "engine_unavailable",
                               std::max(1, static_cast<int>(std::ceil(engine_.seconds_to_next_attempt()))));
            break;
        }
        protocol::Submit s;
        s.slot = static_cast<std::uint32_t>(slot);
        s.max_tokens = g.max_tokens;
        s.temperature = g.temperature;
        s.top_p = g.top_p;
        s.prompt = g.prompt;
        s.extension = g.audio;
        s.options.seed = g.seed;
        auto candidate = engine_.submit(std::move(s));
        waiting_on = candidate;
        while (true) {
            auto ev = co_await candidate->next(Clock::now() + std::chrono::hours(24));
            if (c.disconnected) {
                engine_.cancel(candidate->id());
                engine_.release(candidate->id());
                metrics_.client_cancels.inc();
                co_return;
            }
            if (!ev) continue;
            if (auto* a = std::get_if<protocol::Accept>(&*ev)) {
                accept = *a;
                stream = candidate;
                break;
            }
            if (auto* e = std::get_if<protocol::Error>(&*ev)) {
                failure = engine_refusal(*e);
                break;
            }
            if (auto* died = std::get_if<EngineDied>(&*ev)) {
                if (attempt + 1 >= o_.retries) {
                    failure = ApiError(503, "server_error", "the engine died before accepting the request (" + died->reason + ")",
                                       "", "engine_unavailable", 2);
                } else {
                    std::fprintf(stderr, "[gateway] %s: the engine died before ACCEPT (%s); retrying\n", id.c_str(),
                                 died->reason.c_str());
                    metrics_.requests_retried.inc();
                }
                break;
            }
        }
    }
    if (failure) {
        co_await write_json(c, req, failure->status, failure->body(), endpoint, failure->retry_after);
        co_return;
    }
    metrics_.tokens_in.inc(static_cast<double>(accept.prompt_tokens));
    // Remembered only once the engine holds the prefix: a refused request leaves nothing.
    affinity_.remember(g.affinity, slot);

    // ---- the answer -------------------------------------------------------------------
    auto& socket = c.stream.socket();
    // Every write has a deadline: a client that stops reading (a full receive window) for
    // --write-deadline seconds is treated as gone: CANCEL, slot freed, connection closed.
    auto send = [&](const std::string& bytes) -> awaitable<void> {
        if (c.disconnected) co_return;
        auto timed_out = std::make_shared<bool>(false);
        asio::steady_timer deadline(io_);
        deadline.expires_after(o_.write_deadline);
        deadline.async_wait([timed_out, &socket](const boost::system::error_code& e) {
            if (e) return;
            *timed_out = true;
            boost::system::error_code ignored;
            socket.cancel(ignored);
        });
        boost::system::error_code ec;
        co_await asio::async_write(socket, asio::buffer(bytes), asio::redirect_error(use_awaitable, ec));
        deadline.cancel();
        if (ec) {
            if (*timed_out)
                std::fprintf(stderr, "[gateway] %s: the client read nothing for %lld s: cancelling\n", id.c_str(),
                             static_cast<long long>(o_.write_deadline.count()));
            c.disconnected = true;
        }
    };
    auto chunk = [&](nlohmann::json choice) {
        nlohmann::json j = {{"id", id}, {"object", object}, {"created", created}, {"model", o_.limits.model_id}};
        j["choices"] = nlohmann::json::array({std::move(choice)});
        return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
    };
    if (g.stream) {
        std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                           "X-Accel-Buffering: no\r\nConnection: close\r\nx-request-id: " + id + "\r\n" +
                           cors_header_block(req) + "\r\n";
        co_await send(head);
        c.close_after = true;  // SSE: the stream ends with the connection
        if (g.chat) {
            nlohmann::json role = nlohmann::json::object();
            role["index"] = 0;
            role["delta"]["role"] = "assistant";
            role["delta"]["content"] = "";
            role["finish_reason"] = nullptr;
            const std::string first_chunk = chunk(role);
            co_await send(first_chunk);
        }
    }
    OutputSplitter splitter(g.start_in_content || !g.chat);
    StopFilter stops(g.stop);
    std::string content, reasoning;
    bool stop_sent = false, first = true;
    auto last_token = Clock::now();
    auto emit = [&](const std::string& text, bool is_reasoning) -> awaitable<void> {
        if (text.empty()) co_return;
        if (!g.stream) {
            (is_reasoning ? reasoning : content) += text;
            co_return;
        }
        nlohmann::json choice = {{"index", 0}, {"finish_reason", nullptr}};
        if (g.chat) choice["delta"] = {{is_reasoning ? "reasoning_content" : "content", text}};
        else choice["text"] = text, choice["logprobs"] = nullptr;
        const std::string piece = chunk(choice);
        co_await send(piece);
    };
    // Routes one piece of output: reasoning as is, answer text through the stop filter.
    auto route_out = [&](const OutputSplitter::Out& out) -> awaitable<void> {
        co_await emit(out.reasoning, true);
        if (out.content.empty() || stops.stopped()) co_return;
        auto f = stops.feed(out.content);
        co_await emit(f.text, false);
        if (f.stopped && !stop_sent) {
            engine_.stop(stream->id());
            stop_sent = true;
        }
    };

    std::optional<protocol::Done> done;
    std::string broken;  // why the stream ended without DONE
    bool cancelled = false;
    while (!done && broken.empty()) {
        auto ev = co_await stream->next(Clock::now() + std::chrono::hours(24));
        if (c.disconnected && !cancelled) {
            engine_.cancel(stream->id());
            metrics_.client_cancels.inc();
            cancelled = true;
        }
        if (!ev) continue;
        if (auto* d = std::get_if<protocol::Data>(&*ev)) {
            auto now = Clock::now();
            if (first) metrics_.ttft.observe(seconds(now - t0));
            else metrics_.inter_token.observe(seconds(now - last_token));
            first = false;
            last_token = now;
            if (stops.stopped() || cancelled) continue;  // after STOP/CANCEL: drop what is in flight
            OutputSplitter::Out piece;
            if (g.chat) piece = splitter.feed(d->bytes);
            else piece.content = d->bytes;
            co_await route_out(piece);
        } else if (auto* d = std::get_if<protocol::Done>(&*ev)) {
            done = *d;
        } else if (auto* e = std::get_if<protocol::Error>(&*ev)) {
            if (e->code == protocol::ErrorCode::Cancelled) co_return;  // the client is gone
            broken = std::string(protocol::to_string(e->code)) + (e->detail.empty() ? "" : ": " + e->detail);
        } else if (auto* died = std::get_if<EngineDied>(&*ev)) {
            broken = "the engine stopped (" + died->reason + ")";
        }
    }
    if (cancelled) co_return;
    engine_.release(stream->id());
    if (done) {
        if (g.chat) {
            const OutputSplitter::Out rest = splitter.flush();
            co_await route_out(rest);
        }
        if (!stops.stopped()) {
            const std::string held = stops.flush().text;
            co_await emit(held, false);
        }
    }
    metrics_.e2e.observe(seconds(Clock::now() - t0));
    if (!done) {
        std::fprintf(stderr, "[gateway] %s: %s\n", id.c_str(), broken.c_str());
        if (g.stream) {
            // Already committed: an error event, then the end marker — never a silent cut.
            nlohmann::json err = ApiError(503, "server_error", "generation failed: " + broken, "", "engine_error").body();
            const std::string event = "data: " + err.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
            co_await send(event);
            const std::string end = "data: [DONE]\n\n";
            co_await send(end);
            metrics_.request(endpoint, 200);
        } else {
            const nlohmann::json err = ApiError(503, "server_error", "generation failed: " + broken, "", "engine_error").body();
            co_await write_json(c, req, 503, err, endpoint, 1);
        }
        co_return;
    }
    metrics_.tokens_out.inc(static_cast<double>(done->stat.emitted));
    const std::string finish = stops.stopped() ? "stop" : done->stat.length_limited ? "length" : "stop";
    const nlohmann::json usage = {{"prompt_tokens", accept.prompt_tokens},
                                  {"completion_tokens", done->stat.emitted},
                                  {"total_tokens", accept.prompt_tokens + done->stat.emitted}};
    if (g.stream) {
        nlohmann::json last = {{"index", 0}, {"finish_reason", finish}};
        if (g.chat) last["delta"] = nlohmann::json::object();
        else last["text"] = "", last["logprobs"] = nullptr;
        const std::string last_chunk = chunk(last);
        co_await send(last_chunk);
        if (g.include_usage) {
            nlohmann::json j = {{"id", id}, {"object", object}, {"created", created}, {"model", o_.limits.model_id},
                                {"choices", nlohmann::json::array()}, {"usage", usage}};
            const std::string usage_chunk = "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
            co_await send(usage_chunk);
        }
        const std::string end = "data: [DONE]\n\n";
        co_await send(end);
        metrics_.request(endpoint, 200);
        co_return;
    }
    nlohmann::json body = {{"id", id}, {"created", created}, {"model", o_.limits.model_id}, {"usage", usage}};
    if (g.chat) {
        nlohmann::json message = {{"role", "assistant"}, {"content", content}};
        if (!reasoning.empty()) message["reasoning_content"] = reasoning;
        body["object"] = "chat.completion";
        body["choices"] = {{{"index", 0}, {"message", message}, {"finish_reason", finish}, {"logprobs", nullptr}}};
    } else {
        body["object"] = "text_completion";
        body["choices"] = {{{"index", 0}, {"text", content}, {"finish_reason", finish}, {"logprobs", nullptr}}};
    }
    co_await write_json(c, req, 200, body, endpoint);
}

}  // namespace inkling::gateway
