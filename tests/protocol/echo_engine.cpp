// echo-engine: a model-free engine that speaks the wire exactly as PROTOCOL.md says, for
// the conformance suite and for client tests (gateway, coli) that need a peer without a
// model. Each "token" is the next 1..3 bytes of the prompt, cycled, so UTF-8 sequences
// split across DATA frames. Requests on different slots generate concurrently, one token
// each per round.
//
//   echo-engine [--slots N] [--context BYTES] [--token-delay-ms MS]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "platform/stop_request.h"
#include "protocol/binary_stdio.h"
#include "protocol/fields.h"
#include "protocol/frame_source.h"
#include "protocol/frame_writer.h"
#include "protocol/tml_render.h"

namespace proto = inkling::protocol;

namespace {

volatile std::sig_atomic_t g_terminate = 0;
void on_terminate() { g_terminate = 1; }

constexpr std::size_t kDmelBins = 80;

struct Config {
    std::uint32_t slots = 4;
    std::uint64_t context = 1u << 20;  // prompt bytes + generated tokens
    int token_delay_ms = 1;
};

struct Active {
    proto::Submit request;
    std::uint64_t emitted = 0;
    std::uint64_t budget = 0;  // max_tokens clamped to the context room
    std::size_t cursor = 0;
};

class EchoEngine {
public:
    explicit EchoEngine(Config config) : config_(config), out_(STDOUT_FILENO) {}

    int run() {
        if (!out_.write(proto::Ready{}) || !out_.write(proto::Stats{stats_json()})) return fail();
        proto::FrameSource in(STDIN_FILENO, proto::Direction::ToEngine);
        while (true) {
            bool busy = !active_.empty();
            if (g_terminate) break;
            auto pumped = in.pump(busy ? config_.token_delay_ms : 200);
            while (auto item = in.next()) handle(*item);
            if (!out_.error().empty()) return fail();
            if (pumped == proto::FrameSource::Pump::Eof) break;
            generate_round();
        }
        // EOF or SIGTERM: finish what is in flight, then exit 0.
        while (!active_.empty()) generate_round();
        return out_.error().empty() ? 0 : fail();
    }

private:
    int fail() {
        std::fprintf(stderr, "[echo] stdout write failed: %s\n", out_.error().c_str());
        return 1;
    }

    std::string stats_json() const {
        return R"({"kind":"info","model":"echo","backend":"none","slots":)" +
               std::to_string(config_.slots) + R"(,"context":)" + std::to_string(config_.context) +
               R"(,"active":)" + std::to_string(active_.size()) + "}";
    }

    void error(const std::string& id, proto::ErrorCode code, std::string detail) {
        out_.write(proto::Error{id, code, std::move(detail)});
    }

    void handle(const proto::ReadItem& item) {
        if (const auto* p = std::get_if<proto::Problem>(&item)) {
            // A frame naming a request in flight is answered with id 0: an ERROR with that
            // id would end the request for the client (PROTOCOL.md §6.6).
            if (find(p->id))
                error(std::string(proto::kUnknownId), p->code,
                      "a frame naming " + p->id + ", which is in flight: " + p->detail);
            else
                error(p->id, p->code, p->detail);
            return;
        }
        const auto& frame = std::get<proto::Frame>(item);
        if (const auto* s = std::get_if<proto::Submit>(&frame)) submit(*s);
        else if (const auto* s = std::get_if<proto::Stop>(&frame)) stop(s->id);
        else if (const auto* c = std::get_if<proto::Cancel>(&frame)) cancel(c->id);
        else if (std::holds_alternative<proto::StatsRequest>(frame)) out_.write(proto::Stats{stats_json()});
    }

    Active* find(const std::string& id) {
        auto it = std::find_if(active_.begin(), active_.end(),
                               [&](const auto& kv) { return kv.second.request.id == id; });
        return it == active_.end() ? nullptr : &it->second;
    }

    void submit(const proto::Submit& s) {
        if (find(s.id)) return error(s.id, proto::ErrorCode::DuplicateId, "id already in flight");
        if (s.slot >= config_.slots)
            return error(s.id, proto::ErrorCode::BadRequest,
                         "slot " + std::to_string(s.slot) + " is outside 0.." +
                             std::to_string(config_.slots - 1));
        if (active_.count(s.slot))
            return error(s.id, proto::ErrorCode::SlotBusy,
                         "slot " + std::to_string(s.slot) + " is serving " +
                             active_.at(s.slot).request.id);
        if (s.prompt.empty()) return error(s.id, proto::ErrorCode::EmptyPrompt, "prompt is empty");
        std::size_t placeholders = count(s.prompt, proto::tml::marker::kAudio);
        if (s.extension.size() % kDmelBins != 0 || s.extension.size() / kDmelBins != placeholders)
            return error(s.id, proto::ErrorCode::AudioMismatch,
                         "frames=" + std::to_string(s.extension.size() / kDmelBins) +
                             " placeholders=" + std::to_string(placeholders) +
                             (s.extension.size() % kDmelBins ? " (extension bytes not a multiple of 80)" : ""));
        for (std::size_t i = 0; i < s.extension.size(); ++i)
            if (static_cast<unsigned char>(s.extension[i]) > 15)
                return error(s.id, proto::ErrorCode::AudioMismatch,
                             "DMel byte " + std::to_string(static_cast<unsigned char>(s.extension[i])) + " at offset " +
                                 std::to_string(i) + " is not a level (0..15)");
        std::uint64_t prompt_tokens = s.prompt.size();
        if (prompt_tokens >= config_.context)
            return error(s.id, proto::ErrorCode::ContextExceeded,
                         "prompt_tokens=" + std::to_string(prompt_tokens) +
                             " requested=" + std::to_string(prompt_tokens + s.max_tokens) +
                             " capacity=" + std::to_string(config_.context));
        out_.write(proto::Accept{s.id, prompt_tokens, 0});
        if (s.options.logprobs > 0) echo_prompt(s);
        Active a{s, 0, std::min(s.max_tokens, config_.context - prompt_tokens), 0};
        if (a.budget == 0) return done(a, false);
        active_.emplace(s.slot, std::move(a));
    }

    static std::size_t count(const std::string& text, std::string_view what) {
        std::size_t n = 0;
        for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
        return n;
    }

    // logprobs=K prompt read-out: every prompt byte is certain.
    void echo_prompt(const proto::Submit& s) {
        for (std::size_t pos = 0; pos < s.prompt.size(); ++pos) {
            auto byte = static_cast<std::uint8_t>(s.prompt[pos]);
            proto::TokenLogprobs lp{pos == 0 ? std::nan("") : 0.0, {}};
            if (pos > 0) lp.top.emplace_back(byte, 0.0);
            out_.write(proto::Echo{s.id, pos, std::string(1, s.prompt[pos]), lp});
        }
    }

    void generate_round() {
        for (auto it = active_.begin(); it != active_.end();) {
            Active& a = it->second;
            const std::string& p = a.request.prompt;
            std::size_t n = 1 + (a.emitted % 3);
            std::string token;
            for (std::size_t i = 0; i < n; ++i) token += p[(a.cursor + i) % p.size()];
            a.cursor = (a.cursor + n) % p.size();
            proto::Data d{a.request.id, token, std::nullopt};
            if (a.request.options.logprobs > 0)
                d.logprobs = proto::TokenLogprobs{0.0, {{static_cast<std::uint8_t>(token[0]), 0.0}}};
            out_.write(d);
            if (++a.emitted >= a.budget) {
                done(a, true);
                it = active_.erase(it);
            } else {
                ++it;
            }
        }
    }

    void done(const Active& a, bool length_limited) {
        proto::DoneStats s{a.emitted, 1000.0, 100.0, 0.0, a.request.prompt.size(), length_limited,
                           {{"reused", "0"}}};
        out_.write(proto::Done{a.request.id, s});
    }

    void stop(const std::string& id) {
        for (auto it = active_.begin(); it != active_.end(); ++it) {
            if (it->second.request.id != id) continue;
            done(it->second, false);
            active_.erase(it);
            return;
        }
        error(id, proto::ErrorCode::NotFound, "no request " + id + " in flight");
    }

    void cancel(const std::string& id) {
        for (auto it = active_.begin(); it != active_.end(); ++it) {
            if (it->second.request.id != id) continue;
            active_.erase(it);
            error(id, proto::ErrorCode::Cancelled, "");
            return;
        }
        error(id, proto::ErrorCode::NotFound, "no request " + id + " in flight");
    }

    Config config_;
    proto::FrameWriter out_;
    std::map<std::uint32_t, Active> active_;  // by slot
};

std::uint64_t number_arg(const char* flag, const char* value) {
    auto v = value ? proto::parse_u64(value) : std::nullopt;
    if (!v) {
        std::fprintf(stderr, "echo-engine: %s needs an unsigned integer\n", flag);
        std::exit(2);
    }
    return *v;
}

}  // namespace

int main(int argc, char** argv) {
    proto::init_binary_stdio();
    inkling::platform::on_terminate_request(on_terminate);  // SIGTERM; Windows: CTRL_BREAK/CTRL_C
    Config config;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--slots") config.slots = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, number_arg(argv[i], v))), ++i;
        else if (a == "--context") config.context = number_arg(argv[i], v), ++i;
        else if (a == "--token-delay-ms") config.token_delay_ms = static_cast<int>(number_arg(argv[i], v)), ++i;
        else {
            std::fprintf(stderr, "echo-engine: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    return EchoEngine(config).run();
}
