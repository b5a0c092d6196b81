// Server::generate — one generation request from admission to the last byte, in no API
// dialect's terms: wait for a slot, submit to the engine (again, transparently, if the
// engine died before ACCEPT), commit HTTP 200 only on ACCEPT, then pump the engine's frames
// through the GenerationDriver (generation_driver.h) and write what the dialect's Formatter
// makes of them. Every wait has a deadline: the slot queue (--queue-timeout), a
// (re)starting engine (120 s), ACCEPT (--accept-deadline), each next frame
// (--frame-deadline), each write (--write-deadline). A client that hangs up gets its
// request CANCELled (gateway/http/hangup_watch.h).
//
// The steps, in order, each a member of Server::Generation (one request's state):
//   admit()                  the model resident, then a slot (the conversation's, if free)
//   submit_until_accepted()  SUBMIT, and again after an engine's death, until ACCEPT
//   refuse() / count()       an error before anything was sent / count_tokens' answer
//   answer()                 the head and opening, pump() of the engine's frames, the end
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "gateway/api/api_error.h"
#include "gateway/generation/generation_driver.h"
#include "gateway/http/connection.h"
#include "gateway/http/hangup_watch.h"
#include "gateway/http/server.h"

namespace inkling::gateway {

using tcp = asio::ip::tcp;
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

}  // namespace

struct Server::Generation {
    Generation(Server& server, Connection& connection, const Request& request, const Dialect& d, GenerationRequest r)
        : s(server), c(connection), req(request), dialect(d), g(std::move(r)), model(*s.models_.find(g.model)),
          engine(model.engine), slots(model.slots) {
        meta.id = dialect.id_prefix + random_hex(24);
        meta.created =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
        meta.model = g.model;
    }

    Server& s;
    Connection& c;
    const Request& req;
    const Dialect& dialect;
    GenerationRequest g;
    const Clock::time_point t0 = Clock::now();
    ResponseMeta meta;
    Model& model;  // the parser accepted only a served id
    EngineSupervisor& engine;
    SlotPool& slots;
    std::shared_ptr<HangupWatch> watch;
    std::shared_ptr<RequestStream> waiting_on;  // the engine stream, once there is one
    std::optional<ApiError> failure;            // the error response, while nothing was sent
    int slot = -1;
    std::shared_ptr<RequestStream> stream;  // the accepted one
    protocol::Accept accept;
    bool counted = false;  // count_only: the engine's refusal named the count (CONTEXT_EXCEEDED)
    Clock::time_point next_probe = Clock::time_point::min();

    const std::string& id() const { return meta.id; }
    void start_watching();
    awaitable<bool> admit();
    awaitable<bool> submit_until_accepted();
    protocol::Submit submit_frame() const;
    awaitable<bool> await_accept(const std::shared_ptr<RequestStream>& candidate, int attempt, int& deaths_with_it);
    awaitable<void> refuse();
    awaitable<void> count();
    awaitable<void> answer();
    awaitable<std::optional<GenerationDriver::End>> pump(GenerationDriver& driver);
    awaitable<void> send(const std::string& bytes);
    awaitable<void> probe();
};

awaitable<void> Server::generate(Connection& c, const Request& req, const Dialect& dialect, GenerationRequest g) {
    Generation run(*this, c, req, dialect, std::move(g));
    // The use keeps the model resident until the end.
    ModelUse use(run.model, models_.changed());
    run.model.requests.inc();
    ++active_requests_;
    struct Leave {
        int& n;
        ~Leave() { --n; }
    } leave{active_requests_};
    run.start_watching();
    struct StopWatching {
        std::shared_ptr<HangupWatch> watch;
        tcp::socket& socket;
        ~StopWatching() {
            watch->stop();
            boost::system::error_code ec;
            socket.cancel(ec);
        }
    } stop_watching{run.watch, c.stream.socket()};

    if (!co_await run.admit()) co_return;  // the client left while queued
    struct Release {
        SlotPool& pool;
        int slot;
        ~Release() {
            if (slot >= 0) pool.release(slot);
        }
    } release{run.slots, run.slot};
    if (!co_await run.submit_until_accepted()) co_return;  // the client left before ACCEPT
    if (run.failure) co_await run.refuse();
    else if (run.g.count_only) co_await run.count();
    else co_await run.answer();
}

// The client's socket, watched while the request runs: a hang-up wakes whatever waits.
void Server::Generation::start_watching() {
    watch = std::make_shared<HangupWatch>(s.io_.get_executor());
    watch->interim_ok = req.version() >= 11;
    watch->on_hangup = [this] {
        c.disconnected = true;
        c.wake->notify();
        if (waiting_on) waiting_on->wake();
    };
    watch->on_half_close = [this] {
        if (waiting_on) waiting_on->wake();  // a stream sends its probe (answer())
    };
    asio::co_spawn(s.io_, watch_hangup(c.stream.socket(), c.buffer, watch), asio::detached);
}

// The model's engine loaded now if it is not (the budget may unload idle ones), then a slot:
// the hinted one, the one this conversation used before, or for a new conversation the one
// unused longest. A failure here is kept for refuse(). false: the client left while queued.
awaitable<bool> Server::Generation::admit() {
    if (auto why = co_await s.models_.make_resident(model, Clock::now() + s.o_.engine_wait))
        failure = unavailable(*why, "model_unavailable", 5, "model");
    int preferred = -1;
    if (g.slot_hint) {
        if (*g.slot_hint >= slots.slots())
            failure = bad_request("'cache_slot' must be below " + std::to_string(slots.slots()), "cache_slot");
        preferred = *g.slot_hint;
    } else if (auto known = model.affinity.find(g.affinity)) {
        preferred = *known;
    } else {
        preferred = model.recency.coldest(g.affinity);  // a new conversation: the slot unused longest
    }
    if (failure) co_return true;
    auto r = co_await slots.acquire(preferred, Clock::now() + s.o_.queue_timeout, c.disconnected, c.wake);
    s.metrics_.queue_wait.observe(seconds(Clock::now() - t0));
    if (r.outcome == SlotPool::Outcome::QueueFull)
        failure = rate_limited("the queue is full; retry later", "queue_full");
    else if (r.outcome == SlotPool::Outcome::TimedOut)
        failure = rate_limited("timed out waiting for a slot", "queue_timeout");
    else if (r.outcome == SlotPool::Outcome::Abandoned) {
        s.metrics_.client_cancels.inc();
        co_return false;
    } else
        slot = r.slot;
    co_return true;
}

// SUBMIT, and again while the engine dies before ACCEPT (--retries in all): ends with
// `stream` accepted, `counted` (count_only), or `failure`. false: the client left.
awaitable<bool> Server::Generation::submit_until_accepted() {
    int deaths_with_it = 0;  // engines that ended while they had this request
    for (int attempt = 0; !failure && !stream && !counted; ++attempt) {
        if (!co_await engine.wait_ready(Clock::now() + s.o_.engine_wait)) {
            failure = unavailable("the engine is not available (" +
                                      std::string(EngineSupervisor::state_name(engine.state())) +
                                      (engine.reason().empty() ? "" : ": " + engine.reason()) + ")",
                                  "engine_unavailable",
                                  std::max(1, static_cast<int>(std::ceil(engine.seconds_to_next_attempt()))));
            break;
        }
        auto candidate = engine.submit(submit_frame());
        // Counting: ACCEPT carries the engine's count and nothing is to be generated. The
        // CANCEL goes out right behind the SUBMIT, so the engine reads both before its next
        // round: it tokenizes the prompt and computes nothing.
        if (g.count_only) engine.cancel(candidate->id());
        waiting_on = candidate;
        if (!co_await await_accept(candidate, attempt, deaths_with_it)) co_return false;
    }
    co_return true;
}

protocol::Submit Server::Generation::submit_frame() const {
    protocol::Submit frame;
    frame.slot = static_cast<std::uint32_t>(slot);
    frame.max_tokens = g.max_tokens;
    frame.temperature = g.temperature;
    frame.top_p = g.top_p;
    frame.prompt = g.prompt;
    frame.extension = g.audio;
    frame.options.seed = g.seed;
    frame.options.top_k = g.top_k;
    frame.grammar = g.constraint;
    // The answer's log-probs: a tail on DATA only (no ECHO, prefix reuse kept), with the
    // alternatives' text, which the gateway cannot look up (PROTOCOL.md §5.1.1).
    if (g.logprobs) frame.options.data_logprobs = std::max<std::uint32_t>(1, *g.logprobs);
    return frame;
}

// One attempt's wait for ACCEPT (--accept-deadline): on ACCEPT `stream`; on the engine's
// ERROR `failure` (or `counted`); on its death a retry, unless this was the last attempt or
// the request killed every engine it was given (a poison request). false: the client left.
awaitable<bool> Server::Generation::await_accept(const std::shared_ptr<RequestStream>& candidate, int attempt,
                                                 int& deaths_with_it) {
    const auto accept_by = Clock::now() + s.o_.accept_deadline;
    while (true) {
        auto ev = co_await candidate->next(accept_by);
        if (c.disconnected) {
            engine.cancel(candidate->id());
            engine.release(candidate->id());
            s.metrics_.client_cancels.inc();
            co_return false;
        }
        if (!ev) {
            if (Clock::now() < accept_by) continue;  // woken early
            // An engine that is alive (the watchdog hears it) but never takes this request.
            std::fprintf(stderr, "[gateway] %s: no ACCEPT for %s within %lld s: cancelling\n", id().c_str(),
                         candidate->id().c_str(), static_cast<long long>(s.o_.accept_deadline.count()));
            engine.cancel(candidate->id());
            engine.release(candidate->id());
            failure = unavailable(
                "the engine did not accept the request within " + std::to_string(s.o_.accept_deadline.count()) + " s",
                "engine_timeout", 1);
            co_return true;
        }
        if (auto* a = std::get_if<protocol::Accept>(&*ev)) {
            accept = *a;
            stream = candidate;
            co_return true;
        }
        if (auto* e = std::get_if<protocol::Error>(&*ev)) {
            const auto n = g.count_only ? context_exceeded_prompt_tokens(*e) : std::nullopt;
            if (n) {
                accept.prompt_tokens = *n;  // too long to serve, counted all the same
                counted = true;
            } else {
                failure = engine_refusal(*e);
            }
            co_return true;
        }
        if (auto* died = std::get_if<EngineDied>(&*ev)) {
            deaths_with_it += died->had_it;
            if (attempt + 1 >= s.o_.retries && deaths_with_it == attempt + 1) {
                // A poison request: every engine that took it died. It fails alone, and
                // not as "retry later" (the engine is fine; see EngineLife's header).
                std::fprintf(stderr, "[gateway] %s: the engine died each of the %d times it had this request: "
                             "failing it\n", id().c_str(), deaths_with_it);
                failure = server_error("the engine died each of the " + std::to_string(deaths_with_it) +
                                           " times it was given this request, so it is not retried (the last: " +
                                           died->reason + ")",
                                       "engine_crashed");
            } else if (attempt + 1 >= s.o_.retries) {
                failure = unavailable("the engine died before accepting the request (" + died->reason + ")",
                                      "engine_unavailable", 2);
            } else {
                std::fprintf(stderr, "[gateway] %s: the engine died before ACCEPT (%s); retrying\n", id().c_str(),
                             died->reason.c_str());
                s.metrics_.requests_retried.inc();
            }
            co_return true;
        }
    }
}

// Nothing was sent yet: the error as the dialect's response.
awaitable<void> Server::Generation::refuse() {
    watch->response_started = true;
    const nlohmann::json body = dialect.error_body(*failure);
    co_await s.write_json(c, req, status_of(dialect, *failure), body, dialect.endpoint, failure->retry_after);
}

// count_tokens: the count, once the engine has ended the request.
awaitable<void> Server::Generation::count() {
    // The slot goes back to the pool only once the engine has ended the request (its
    // answer to the CANCEL, or a DONE if a round ran first), or the frame deadline passed.
    const auto end_by = Clock::now() + s.o_.frame_deadline;
    while (stream && !c.disconnected) {
        auto ev = co_await stream->next(end_by);
        if (!ev ? Clock::now() >= end_by : !std::holds_alternative<protocol::Data>(*ev)) break;
    }
    if (stream) engine.release(stream->id());
    if (c.disconnected) co_return;
    Answer answer;
    answer.usage.prompt_tokens = accept.prompt_tokens;
    watch->response_started = true;
    co_await s.write_json(c, req, 200, dialect.make(g, meta)->body(answer), dialect.endpoint);
}

// After ACCEPT: the SSE head (streaming) and the opening, the engine's frames through the
// driver (pump), then the last events, or the body or error response.
awaitable<void> Server::Generation::answer() {
    s.metrics_.tokens_in.inc(static_cast<double>(accept.prompt_tokens));
    // Remembered only once the engine holds the prefix: a refused request leaves nothing.
    model.prompt_tokens.inc(static_cast<double>(accept.prompt_tokens));
    model.cached_tokens.inc(static_cast<double>(accept.reused.value_or(0)));
    model.affinity.remember(g.affinity, slot);
    model.recency.touch(slot);

    auto formatter = dialect.make(g, meta);
    GenerationDriver driver(*formatter, driver_options(g, dialect.message_output));
    if (g.stream) {
        const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                                 "X-Accel-Buffering: no\r\nConnection: close\r\nx-request-id: " + id() + "\r\nrequest-id: " + id() + "\r\n" +
                                 "x-conversation-key: " + g.conversation_key + "\r\n" +
                                 s.cors_header_block(req) + "\r\n";
        co_await send(head);
        c.close_after = true;  // SSE: the stream ends with the connection
    }
    const std::string opening = driver.accepted(accept);
    co_await send(opening);
    co_await probe();
    const std::optional<GenerationDriver::End> end = co_await pump(driver);
    if (!end) co_return;  // the client is gone
    engine.release(stream->id());
    s.metrics_.e2e.observe(seconds(Clock::now() - t0));
    if (g.stream) {
        // Committed: the last events, or an error event and the end marker — never a silent cut.
        co_await send(end->bytes);
        s.metrics_.request(dialect.endpoint, 200);
        co_return;
    }
    watch->response_started = true;
    if (end->complete) {
        co_await s.write_json(c, req, 200, end->body, dialect.endpoint, 0, g.conversation_key);
    } else {
        const nlohmann::json body = dialect.error_body(*end->error);
        co_await s.write_json(c, req, status_of(dialect, *end->error), body, dialect.endpoint, end->error->retry_after);
    }
}

// The engine's frames until DONE, an ERROR, its death or the frame deadline, each through the
// driver and out to the client. A client that leaves gets its request CANCELled; nullopt then
// (nothing more is written).
awaitable<std::optional<GenerationDriver::End>> Server::Generation::pump(GenerationDriver& driver) {
    std::optional<GenerationDriver::End> end;
    bool first = true, cancelled = false;
    auto last_token = Clock::now();
    auto frame_by = Clock::now() + s.o_.frame_deadline;
    while (!end) {
        const bool probing = g.stream && watch->half_closed && !cancelled;
        auto ev = co_await stream->next(probing ? std::min(frame_by, next_probe) : frame_by);
        if (c.disconnected && !cancelled) {
            engine.cancel(stream->id());
            s.metrics_.client_cancels.inc();
            cancelled = true;
        }
        if (!ev) {
            if (Clock::now() < frame_by) {  // woken early: the client left or half-closed, or a probe is due
                if (!cancelled) co_await probe();
                continue;
            }
            // The engine is alive (the watchdog hears it) but this request makes no progress.
            engine.cancel(stream->id());
            engine.release(stream->id());
            if (cancelled) co_return std::nullopt;  // the client is gone; the engine never confirmed the CANCEL
            std::fprintf(stderr, "[gateway] %s: no frame for %s within %lld s: cancelling\n", id().c_str(),
                         stream->id().c_str(), static_cast<long long>(s.o_.frame_deadline.count()));
            end = driver.failed(generation_failure(
                "the engine sent nothing for this request within " + std::to_string(s.o_.frame_deadline.count()) + " s",
                "engine_timeout"));
            break;
        }
        frame_by = Clock::now() + s.o_.frame_deadline;
        if (auto* d = std::get_if<protocol::Data>(&*ev)) {
            auto now = Clock::now();
            if (first) s.metrics_.ttft.observe(seconds(now - t0));
            else s.metrics_.inter_token.observe(seconds(now - last_token));
            first = false;
            last_token = now;
            if (cancelled) continue;  // after CANCEL: drop what is in flight
            const auto step = driver.data(d->bytes, d->logprobs);
            co_await send(step.bytes);
            if (step.stop_engine) engine.stop(stream->id());
        } else if (auto* d = std::get_if<protocol::Done>(&*ev)) {
            if (cancelled) co_return std::nullopt;
            s.metrics_.tokens_out.inc(static_cast<double>(d->stat.emitted));
            model.completion_tokens.inc(static_cast<double>(d->stat.emitted));
            end = driver.done(d->stat);
        } else if (auto* e = std::get_if<protocol::Error>(&*ev)) {
            if (cancelled || e->code == protocol::ErrorCode::Cancelled) co_return std::nullopt;  // the client is gone
            const std::string why = std::string(protocol::to_string(e->code)) + (e->detail.empty() ? "" : ": " + e->detail);
            std::fprintf(stderr, "[gateway] %s: %s\n", id().c_str(), why.c_str());
            end = driver.failed(generation_failure(why));
        } else if (auto* died = std::get_if<EngineDied>(&*ev)) {
            if (cancelled) co_return std::nullopt;
            const std::string why = "the engine stopped (" + died->reason + ")";
            std::fprintf(stderr, "[gateway] %s: %s\n", id().c_str(), why.c_str());
            end = driver.failed(generation_failure(why));
        }
    }
    co_return end;
}

// Every write has a deadline: a client that stops reading (a full receive window) for
// --write-deadline seconds is treated as gone: CANCEL, slot freed, connection closed.
awaitable<void> Server::Generation::send(const std::string& bytes) {
    if (c.disconnected || bytes.empty()) co_return;
    watch->response_started = true;
    auto& socket = c.stream.socket();
    auto timed_out = std::make_shared<bool>(false);
    asio::steady_timer deadline(s.io_);
    deadline.expires_after(s.o_.write_deadline);
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
            std::fprintf(stderr, "[gateway] %s: the client read nothing for %lld s: cancelling\n", id().c_str(),
                         static_cast<long long>(s.o_.write_deadline.count()));
        c.disconnected = true;
    }
}

// A half-closed client may be gone for good or still reading (nc -N): a write tells, since
// a closed socket answers it with a reset, which the watch sees. So while the stream is
// silent, a half-closed client gets an SSE comment at once and then every kProbeEvery
// (before the stream, the watch sends its own probes).
awaitable<void> Server::Generation::probe() {
    if (!g.stream || !watch->half_closed || Clock::now() < next_probe) co_return;
    next_probe = Clock::now() + kProbeEvery;
    const std::string comment = ":\n\n";
    co_await send(comment);
}

}  // namespace inkling::gateway
