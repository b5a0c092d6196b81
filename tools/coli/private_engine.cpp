#include "tools/coli/private_engine.h"

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "platform/process.h"
#include "protocol/frame_encode.h"
#include "protocol/text/output_splitter.h"

namespace coli {

namespace proto = inkling::protocol;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

PrivateEngine::PrivateEngine(const std::string& engine_binary, const std::string& model_dir, int ctx)
    : model_dir_(model_dir) {
    // The engine's log: a fresh file (O_EXCL, 0600), removed when coli ends unless an error
    // message named it.
    stderr_path_ = (std::filesystem::temp_directory_path() / "coli-engine-XXXXXX.log").string();
    const auto log = inkling::platform::create_private_file(stderr_path_, 4);
    if (log == inkling::platform::kNoFile || !inkling::platform::close_file(log))
        throw std::runtime_error("cannot create a log file in " + std::filesystem::temp_directory_path().string());
    engine_ = std::make_unique<proto::EngineProcess>(
        std::vector<std::string>{engine_binary, "serve", "--model", model_dir, "--slots", "1", "--ctx", std::to_string(ctx)},
        stderr_path_);
    engine_->keep_raw_stdout(false);
    auto first = engine_->next(std::chrono::minutes(30));  // loading a big model takes a while
    if (!first || !std::holds_alternative<proto::Frame>(*first) ||
        !std::holds_alternative<proto::Ready>(std::get<proto::Frame>(*first))) {
        const std::string why = engine_failure("the engine did not start");
        engine_.reset();
        std::error_code ec;  // no destructor after a throwing constructor
        if (!keep_log_) std::filesystem::remove(stderr_path_, ec);
        throw std::runtime_error(why);
    }
    auto info = engine_->next(2s);
    if (info && std::holds_alternative<proto::Frame>(*info))
        if (auto* s = std::get_if<proto::Stats>(&std::get<proto::Frame>(*info))) info_ = s->json;
}

PrivateEngine::~PrivateEngine() {
    engine_.reset();  // the engine ends first: it writes the log until then
    std::error_code ec;
    if (!keep_log_) std::filesystem::remove(stderr_path_, ec);
}

std::string PrivateEngine::engine_failure(const std::string& what) {
    std::string msg = what;
    auto status = engine_->wait_exit(std::chrono::milliseconds(500));
    if (status) {
        msg += ": the engine " + status->describe();
    } else {
        msg += ": the engine stopped answering";
    }
    std::string tail = engine_->stderr_tail(6);
    if (!tail.empty()) {
        msg += "\nlast lines of its log (" + stderr_path_ + "):\n" + tail;
        keep_log_ = true;  // the message names it
    }
    return msg;
}

std::string PrivateEngine::describe() const {
    auto j = nlohmann::json::parse(info_, nullptr, false);
    std::string d = "private engine on " + model_dir_;
    if (j.is_object()) d += " (" + j.value("backend", std::string("?")) + ", " + std::to_string(j.value("layers", 0)) + " layers)";
    return d;
}

TurnResult PrivateEngine::turn(const std::vector<proto::tml::Message>& history, const std::vector<Clip>& clips,
                               const TurnSettings& settings, const Output& out, const std::function<bool()>& interrupted) {
    TurnResult r;
    proto::Submit s;
    s.id = "c" + std::to_string(next_id_++);
    s.slot = 0;
    s.max_tokens = static_cast<std::uint64_t>(settings.max_tokens);
    s.temperature = settings.temperature;
    s.top_p = settings.top_p;
    s.prompt = proto::tml::render(history, {.effort = settings.effort});
    for (const auto& c : clips) s.extension.append(c.dmel.begin(), c.dmel.end());
    const auto t0 = Clock::now();
    if (!engine_->write(proto::encode(s))) {
        r.error = engine_failure("cannot write to the engine");
        return r;
    }
    inkling::protocol::text::OutputSplitter split(settings.effort == 0.0);
    bool stop_sent = false, first = true;
    while (true) {
        if (!stop_sent && interrupted()) {
            engine_->write(proto::encode(proto::Stop{s.id}));
            stop_sent = true;
            r.stopped = true;
        }
        auto item = engine_->next(100ms);
        if (!item) {
            if (engine_->stdout_eof()) {
                r.error = engine_failure("the engine ended during the turn");
                return r;
            }
            continue;
        }
        if (auto* p = std::get_if<proto::Problem>(&*item)) {
            r.error = "the engine sent a malformed frame: " + p->detail;
            return r;
        }
        const auto& f = std::get<proto::Frame>(*item);
        if (auto* a = std::get_if<proto::Accept>(&f); a && a->id == s.id) {
            r.prompt_tokens = static_cast<long>(a->prompt_tokens);
            r.reused_tokens = a->reused ? static_cast<long>(*a->reused) : -1;
        } else if (auto* d = std::get_if<proto::Data>(&f); d && d->id == s.id) {
            if (first) r.ttft_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            first = false;
            auto piece = split.feed(d->bytes);
            r.content += piece.content;
            r.reasoning += piece.reasoning;
            if (!piece.reasoning.empty()) out.reasoning(piece.reasoning);
            if (!piece.content.empty()) out.content(piece.content);
        } else if (auto* d = std::get_if<proto::Done>(&f); d && d->id == s.id) {
            auto rest = split.flush();
            r.content += rest.content;
            if (!rest.content.empty()) out.content(rest.content);
            r.completion_tokens = static_cast<long>(d->stat.emitted);
            r.cache_hit_pct = d->stat.cache_hit_pct;
            r.length_limited = d->stat.length_limited;
            break;
        } else if (auto* e = std::get_if<proto::Error>(&f); e && e->id == s.id) {
            r.error = std::string(proto::to_string(e->code)) + (e->detail.empty() ? "" : ": " + e->detail);
            break;
        }
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
}

std::string PrivateEngine::stats() {
    engine_->write(proto::encode(proto::StatsRequest{}));
    auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
        auto item = engine_->next(200ms);
        if (!item) continue;
        if (auto* f = std::get_if<proto::Frame>(&*item))
            if (auto* s = std::get_if<proto::Stats>(f)) {
                auto j = nlohmann::json::parse(s->json, nullptr, false);
                if (j.is_object() && j.value("kind", "") == "stats") return j.dump(2);
            }
    }
    return "(no stats from the engine)";
}

}  // namespace coli
