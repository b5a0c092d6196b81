#include "tools/coli/attached.h"

// <utility> before Boost: 1.74's Asio uses std::exchange without including it, which g++ 12
// in C++20 mode rejects.
#include <utility>

#include <chrono>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <nlohmann/json.hpp>

#include "protocol/text/base64.h"
#include "tools/coli/sse_reader.h"

namespace coli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
namespace tml = inkling::protocol::tml;

std::optional<Url> parse_url(const std::string& text) {
    std::string rest = text;
    if (rest.starts_with("http://")) rest = rest.substr(7);
    else if (rest.find("://") != std::string::npos) return std::nullopt;  // https needs TLS: not here
    rest = rest.substr(0, rest.find('/'));
    if (rest.empty()) return std::nullopt;
    auto colon = rest.rfind(':');
    if (colon == std::string::npos) return Url{rest, "80"};
    return Url{rest.substr(0, colon), rest.substr(colon + 1)};
}

namespace {

// One HTTP exchange on a fresh connection; every step runs within `deadline`.
class Exchange {
public:
    Exchange(const Url& url, Clock::time_point deadline) : stream_(io_), deadline_(deadline) {
        tcp::resolver resolver(io_);
        boost::system::error_code ec;
        auto endpoints = resolver.resolve(url.host, url.port, ec);
        if (ec) throw std::runtime_error("cannot resolve " + url.host + ": " + ec.message());
        run([&](auto done) { stream_.async_connect(endpoints, [done](auto ec, auto) { done(ec); }); });
    }
    template <class Start>
    void run(Start start, const std::function<bool()>* interrupted = nullptr) {
        boost::system::error_code result = asio::error::would_block;
        io_.restart();
        start([&](boost::system::error_code ec) { result = ec; });
        while (result == asio::error::would_block) {
            const bool stop = interrupted && (*interrupted)();
            if (Clock::now() >= deadline_ || stop) {
                stream_.socket().close();
                io_.run();  // let the cancelled operation finish
                throw std::runtime_error(stop ? "interrupted" : "timed out");
            }
            io_.run_for(std::chrono::milliseconds(50));
        }
        if (result && result != http::error::need_buffer && result != http::error::end_of_stream)
            throw std::runtime_error(result.message());
    }
    asio::io_context io_;
    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    Clock::time_point deadline_;
};

http::request<http::string_body> make_request(http::verb method, const std::string& target, const Url& url,
                                              const std::string& key, std::string body) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, url.host + ":" + url.port);
    req.set(http::field::user_agent, "coli");
    if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
    if (!body.empty()) {
        req.set(http::field::content_type, "application/json");
        req.body() = std::move(body);
    }
    req.prepare_payload();
    return req;
}

std::pair<int, std::string> get(const Url& url, const std::string& key, const std::string& target, int timeout_ms) {
    Exchange x(url, Clock::now() + std::chrono::milliseconds(timeout_ms));
    auto req = make_request(http::verb::get, target, url, key, "");
    x.run([&](auto done) { http::async_write(x.stream_, req, [done](auto ec, auto) { done(ec); }); });
    http::response<http::string_body> res;
    x.run([&](auto done) { http::async_read(x.stream_, x.buffer_, res, [done](auto ec, auto) { done(ec); }); });
    return {res.result_int(), res.body()};
}

}  // namespace

std::optional<std::string> Attached::probe(const Url& url, const std::string& key, int timeout_ms) {
    try {
        auto [hs, health] = get(url, key, "/health", timeout_ms);
        auto h = nlohmann::json::parse(health, nullptr, false);
        if (hs != 200 || !h.is_object() || h.value("status", "") != "ok") return std::nullopt;
        auto [ms, models] = get(url, key, "/v1/models", timeout_ms);
        auto m = nlohmann::json::parse(models, nullptr, false);
        if (ms != 200 || !m.is_object() || !m.contains("data") || m["data"].empty()) return std::nullopt;
        return m["data"][0].value("id", std::string());
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

Attached::Attached(Url url, std::string key, std::string model) : url_(std::move(url)), key_(std::move(key)), model_(std::move(model)) {}

std::string Attached::describe() const { return "gateway http://" + url_.host + ":" + url_.port + " (model " + model_ + ")"; }

TurnResult Attached::turn(const std::vector<tml::Message>& history, const std::vector<Clip>& clips,
                          const TurnSettings& settings, const Output& out, const std::function<bool()>& interrupted) {
    TurnResult r;
    // The history as OpenAI messages; the clips ride on the last (user) message.
    nlohmann::json messages = nlohmann::json::array();
    for (std::size_t i = 0; i < history.size(); ++i) {
        const auto& m = history[i];
        std::string role = m.role == tml::Role::User ? "user" : m.role == tml::Role::Assistant ? "assistant" : "system";
        std::string text;
        for (const auto& p : m.parts)
            if (p.kind == tml::Part::Kind::Text) text += p.text;
        if (i + 1 == history.size() && !clips.empty()) {
            nlohmann::json parts = nlohmann::json::array();
            if (!text.empty()) parts.push_back({{"type", "text"}, {"text", text}});
            for (const auto& c : clips) {
                const std::string enc = inkling::protocol::text::encode_base64(c.wav);
                parts.push_back({{"type", "input_audio"}, {"input_audio", {{"data", enc}, {"format", "wav"}}}});
            }
            messages.push_back({{"role", role}, {"content", parts}});
        } else {
            messages.push_back({{"role", role}, {"content", text}});
        }
    }
    nlohmann::json body = {{"model", model_},
                           {"messages", messages},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}},
                           {"max_tokens", settings.max_tokens},
                           {"temperature", settings.temperature},
                           {"top_p", settings.top_p}};
    if (auto level = tml::level_for_effort(settings.effort)) body["reasoning_effort"] = std::string(*level);
    const auto t0 = Clock::now();
    try {
        Exchange x(url_, Clock::now() + std::chrono::hours(24));
        auto req = make_request(http::verb::post, "/v1/chat/completions", url_, key_, body.dump());
        x.run([&](auto done) { http::async_write(x.stream_, req, [done](auto ec, auto) { done(ec); }); }, &interrupted);
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(boost::none);
        x.run([&](auto done) { http::async_read_header(x.stream_, x.buffer_, parser, [done](auto ec, auto) { done(ec); }); },
              &interrupted);
        const int status = parser.get().result_int();
        std::string error_body;  // a non-200 answer's body
        SseReader sse;
        bool first = true, finished = false, usage_seen = false;
        long pieces = 0;  // streamed deltas, one a token: the count when a stop leaves no usage
        while (!parser.is_done() && !finished) {
            char chunk[8192];
            parser.get().body().data = chunk;
            parser.get().body().size = sizeof chunk;
            try {
                // read_some: hand each piece over as it arrives (read would wait for EOF).
                x.run([&](auto done) { http::async_read_some(x.stream_, x.buffer_, parser, [done](auto ec, auto) { done(ec); }); },
                      &interrupted);
            } catch (const std::runtime_error& e) {
                if (std::string(e.what()) == "interrupted") {
                    r.stopped = true;  // closing the stream makes the gateway cancel
                    break;
                }
                throw;
            }
            const std::string_view got(chunk, sizeof chunk - parser.get().body().size);
            if (status != 200) {
                error_body.append(got);
                continue;
            }
            for (const SseEvent& event : sse.feed(got)) {
                const std::string& data = event.data;
                if (data == "[DONE]") {
                    finished = true;
                    break;
                }
                auto j = nlohmann::json::parse(data, nullptr, false);
                if (!j.is_object()) continue;
                if (j.contains("error")) {
                    r.error = j["error"].value("message", std::string("error"));
                    continue;
                }
                if (j.contains("usage") && j["usage"].is_object()) {
                    r.prompt_tokens = j["usage"].value("prompt_tokens", 0L);
                    r.completion_tokens = j["usage"].value("completion_tokens", 0L);
                    usage_seen = true;
                }
                if (!j.contains("choices") || j["choices"].empty()) continue;
                const auto& ch = j["choices"][0];
                if (ch.contains("finish_reason") && ch["finish_reason"].is_string())
                    r.length_limited = ch["finish_reason"] == "length";
                if (!ch.contains("delta")) continue;
                const auto& d = ch["delta"];
                bool carried = false;
                for (const char* key : {"reasoning_content", "content"}) {
                    if (!d.contains(key) || !d[key].is_string() || d[key].get<std::string>().empty()) continue;
                    if (first) r.ttft_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
                    first = false;
                    std::string text = d[key].get<std::string>();
                    carried = true;
                    if (std::string(key) == "content") {
                        r.content += text;
                        out.content(text);
                    } else {
                        r.reasoning += text;
                        out.reasoning(text);
                    }
                }
                pieces += carried;
            }
        }
        if (!usage_seen) r.completion_tokens = pieces;  // stopped: the stream ended before its usage
        if (status != 200) {
            auto j = nlohmann::json::parse(error_body, nullptr, false);
            r.error = "HTTP " + std::to_string(status) +
                      (j.is_object() && j.contains("error") ? ": " + j["error"].value("message", std::string()) : "");
        }
    } catch (const std::exception& e) {
        r.error = std::string("the gateway connection failed: ") + e.what();
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
}

std::string Attached::stats() {
    try {
        auto [status, body] = get(url_, key_, "/v1/stats", 3000);
        auto j = nlohmann::json::parse(body, nullptr, false);
        return status == 200 && j.is_object() ? j.dump(2) : "HTTP " + std::to_string(status);
    } catch (const std::exception& e) {
        return std::string("stats unavailable: ") + e.what();
    }
}

}  // namespace coli
