// Arbitrary bytes as the engine's stdin, through the real serve loop in-process
// (engine/serve/serve_loop.h): frame reader → the scheduler's checks → rounds of a tiny
// model's forward → the frame writer. The model is the audio fixture of tools/make-tiny
// (an audio tower, 500 ids), with a tokenizer that lacks ids 490..498, so a sampled token
// it cannot decode happens too; small slots and context keep each input fast.
//
// The input arrives line by line through a pipe, one turn of the loop after each line (a
// blank line is a round with nothing new), so STOP and CANCEL land mid-generation; then
// EOF, and the loop drains. What PROTOCOL.md promises of an engine, for any input:
//  - the loop never crashes, aborts or throws out, runs until EOF and exits 0 once drained;
//  - its output is READY, the info STATS, then well-formed frames only;
//  - every malformed frame is answered by an ERROR with its code and its id (0 when that
//    names a request in flight), in input order;
//  - every SUBMIT by one ACCEPT or one early ERROR, every STATS request by a STATS;
//  - per id the order of §7.1: ACCEPT, ECHO*, DATA*, then exactly one DONE or ERROR
//    (DUPLICATE_ID names a request in flight without ending it); nothing left in flight.
// A violation aborts with a message on stderr (run.sh closes the engine's stderr with
// -close_fd_mask=2; run the crash input alone to read it). INKLING_FUZZ_PRINT=1 prints
// the engine's output of each input to stderr.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/model/tokenizer.h"
#include "engine/model/weights.h"
#include "engine/serve/scheduler.h"
#include "engine/serve/serve_loop.h"
#include "protocol/frame_reader.h"
#include "tests/support/tiny_tokenizer.h"

namespace proto = inkling::protocol;
namespace serve = inkling::serve;

namespace {

constexpr int kAudioToken = 451;          // the audio fixture's <|audio|> id
constexpr int kFirstUndecodable = 490;    // ids 490..498 are not in the tokenizer
constexpr std::uint64_t kMaxTurns = 1u << 20;  // far past any drain of these limits: a livelock

struct Engine {
    inkling::model::Model model;
    inkling::model::Tokenizer tokenizer;
    serve::ServeOptions options;
    inkling::cpu::ThreadPool pool{1};  // one thread: an input runs the same way every time
};
Engine* g_engine = nullptr;

[[noreturn]] void violated(const std::string& what) {
    std::fprintf(stderr, "serve fuzz: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

// Bytes 0..255, then two-byte tokens up to 489, the audio placeholder as an added token.
inkling::model::Tokenizer make_tokenizer() {
    std::vector<std::string> extra;
    for (int id = 256; id < kAudioToken; ++id) extra.push_back("t" + std::to_string(id));
    nlohmann::json j = test_support::tiny_tokenizer(extra);
    for (int id = kAudioToken + 1; id < kFirstUndecodable; ++id)
        j["model"]["vocab"][test_support::byte_level("t" + std::to_string(id))] = id;
    j["added_tokens"] = nlohmann::json::array(
        {{{"id", kAudioToken}, {"content", "<|audio|>"}, {"special", true}, {"lstrip", false}, {"rstrip", false},
          {"single_word", false}, {"normalized", false}}});
    return inkling::model::Tokenizer::parse(j.dump(), "serve fuzz tokenizer");
}

void write_all(int fd, std::string_view bytes, serve::ServeLoop& loop) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n > 0) {
            bytes.remove_prefix(static_cast<std::size_t>(n));
        } else if (n < 0 && errno == EAGAIN) {
            if (!loop.turn()) violated("the loop ended before its input did");  // drains the pipe
        } else if (n < 0 && errno != EINTR) {
            violated("write to the loop's input failed");
        }
    }
}

std::string read_all(int fd) {
    std::string out;
    if (::lseek(fd, 0, SEEK_SET) != 0) violated("lseek on the output");
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) violated("read of the output failed");
        out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
}

std::vector<proto::ReadItem> read_items(proto::Direction dir, std::string_view bytes) {
    proto::FrameReader reader(dir);
    reader.feed(bytes);
    reader.finish();
    std::vector<proto::ReadItem> items;
    while (auto item = reader.next()) items.push_back(std::move(*item));
    if (dir == proto::Direction::FromEngine && reader.skipped_lines() != 0) violated("the output has lines of no frame");
    return items;
}

template <class T>
const T* as(const proto::ReadItem& item) {
    const auto* frame = std::get_if<proto::Frame>(&item);
    return frame ? std::get_if<T>(frame) : nullptr;
}

// What the loop was asked, read independently of the loop from the same bytes.
struct Asked {
    std::vector<proto::Problem> problems;
    std::size_t submits = 0, stops = 0, cancels = 0, stats = 0;
};

Asked asked_of(std::string_view input) {
    Asked a;
    for (const auto& item : read_items(proto::Direction::ToEngine, input)) {
        if (const auto* p = std::get_if<proto::Problem>(&item)) a.problems.push_back(*p);
        else if (as<proto::Submit>(item)) ++a.submits;
        else if (as<proto::Stop>(item)) ++a.stops;
        else if (as<proto::Cancel>(item)) ++a.cancels;
        else if (as<proto::StatsRequest>(item)) ++a.stats;
        else violated("the engine-side reader yielded an engine frame");
    }
    return a;
}

void check_output(const Asked& asked, std::string_view output) {
    const auto items = read_items(proto::Direction::FromEngine, output);
    if (items.size() < 2 || !as<proto::Ready>(items[0])) violated("the output does not start with READY");
    const auto* info = as<proto::Stats>(items[1]);
    if (!info || info->json.find(R"("kind":"info")") == std::string::npos) violated("no info STATS after READY");

    std::map<std::string, bool> echo_allowed;  // the ids in flight; ECHO only before their first DATA
    std::size_t accepts = 0, refusals = 0, dones = 0, stats = 0, cancelled = 0, not_found = 0, problem = 0;
    for (std::size_t i = 2; i < items.size(); ++i) {
        const auto& item = items[i];
        if (const auto* p = std::get_if<proto::Problem>(&item)) violated("malformed output frame: " + p->detail);
        const auto& frame = std::get<proto::Frame>(item);
        if (const auto* a = std::get_if<proto::Accept>(&frame)) {
            if (echo_allowed.count(a->id)) violated("ACCEPT " + a->id + " while it is in flight");
            echo_allowed[a->id] = true;
            ++accepts;
        } else if (const auto* e = std::get_if<proto::Echo>(&frame)) {
            auto it = echo_allowed.find(e->id);
            if (it == echo_allowed.end() || !it->second) violated("ECHO " + e->id + " outside its request's prefill");
        } else if (const auto* d = std::get_if<proto::Data>(&frame)) {
            auto it = echo_allowed.find(d->id);
            if (it == echo_allowed.end()) violated("DATA " + d->id + " not in flight");
            it->second = false;
        } else if (const auto* d = std::get_if<proto::Done>(&frame)) {
            if (!echo_allowed.erase(d->id)) violated("DONE " + d->id + " not in flight");
            ++dones;
        } else if (const auto* e = std::get_if<proto::Error>(&frame)) {
            const bool in_flight = echo_allowed.count(e->id) != 0;
            // The malformed frames' answers, in input order, among the ERRORs: with the
            // frame's id, or 0 when that id is in flight (an ERROR with it would end it).
            if (problem < asked.problems.size() && asked.problems[problem].code == e->code &&
                (asked.problems[problem].id == e->id || e->id == proto::kUnknownId))
                ++problem;
            if (e->code == proto::ErrorCode::DuplicateId) {
                if (!in_flight) violated("DUPLICATE_ID " + e->id + " not in flight");
                ++refusals;
            } else if (e->code == proto::ErrorCode::NotFound) {
                if (in_flight) violated("NOT_FOUND " + e->id + " while in flight");
                ++not_found;
            } else if (in_flight) {
                echo_allowed.erase(e->id);
                if (e->code == proto::ErrorCode::Cancelled) ++cancelled;
                else if (e->code != proto::ErrorCode::Internal)
                    violated("request " + e->id + " ended by " + std::string(proto::to_string(e->code)));
            } else {
                if (e->code == proto::ErrorCode::Cancelled) violated("CANCELLED " + e->id + " not in flight");
                ++refusals;
            }
        } else if (std::holds_alternative<proto::Stats>(frame)) {
            ++stats;
        } else if (!std::holds_alternative<proto::Event>(frame)) {
            violated("a frame the engine never sends after READY");
        }
    }
    if (!echo_allowed.empty()) violated("request " + echo_allowed.begin()->first + " never ended");
    if (problem != asked.problems.size())
        violated("malformed frame " + std::to_string(problem) + " (" + asked.problems[problem].detail + ") unanswered");
    if (refusals < asked.problems.size() || accepts + refusals - asked.problems.size() != asked.submits)
        violated("SUBMITs " + std::to_string(asked.submits) + " != ACCEPTs " + std::to_string(accepts) +
                 " + early ERRORs " + std::to_string(refusals - asked.problems.size()));
    if (stats != asked.stats + dones) violated("STATS frames: not one per request and one per DONE");
    // Each STOP is a DONE or NOT_FOUND, each CANCEL a CANCELLED or NOT_FOUND.
    if (cancelled > asked.cancels || not_found + cancelled > asked.stops + asked.cancels ||
        asked.stops + asked.cancels > not_found + cancelled + dones)
        violated("STOP/CANCEL answers do not add up");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* env = std::getenv("INKLING_FUZZ_FIXTURES");
    const std::filesystem::path dir = std::filesystem::path(env ? env : INKLING_FIXTURE_DIR) / "audio-hf-f32";
    if (!std::filesystem::exists(dir / "config.json")) {
        std::fprintf(stderr, "serve fuzz: no fixture at %s (tools/make-tiny/ensure.sh %s)\n", dir.c_str(),
                     dir.parent_path().c_str());
        std::exit(2);
    }
    // Three slots of 24 positions, prompts fed 5 tokens a round: every path of the
    // scheduler (batched decode beside a prefill, the context clamp, pins) within a few
    // dozen rounds.
    serve::ServeOptions options;
    options.slots = 3;
    options.context = 24;
    options.prefill_chunk = 5;
    options.pins = 2;
    g_engine = new Engine{inkling::model::load_model(dir), make_tokenizer(), options};
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    // A fresh scheduler per input (the model stays): no state from the previous input.
    serve::Scheduler scheduler(g_engine->model, &g_engine->tokenizer, g_engine->pool, g_engine->options);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) violated("pipe2");
    ::fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK);
    const int out_fd = ::memfd_create("serve-fuzz-out", MFD_CLOEXEC);
    if (out_fd < 0) violated("memfd_create");
    {
        serve::ServeLoop loop(scheduler, pipe_fds[0], out_fd, serve::LoopWaits{0, 0});
        loop.greet();
        for (std::size_t at = 0; at < input.size();) {
            const std::size_t lf = input.find('\n', at);
            const std::size_t end = lf == std::string_view::npos ? input.size() : lf + 1;
            write_all(pipe_fds[1], input.substr(at, end - at), loop);
            at = end;
            if (!loop.turn()) violated("the loop ended before its input did");
        }
        ::close(pipe_fds[1]);
        std::uint64_t turns = 0;
        while (loop.turn())
            if (++turns > kMaxTurns) violated("the loop did not drain");
        if (loop.exit_status() != 0) violated("exit status " + std::to_string(loop.exit_status()));
    }
    ::close(pipe_fds[0]);
    const std::string output = read_all(out_fd);
    ::close(out_fd);
    if (std::getenv("INKLING_FUZZ_PRINT")) std::fwrite(output.data(), 1, output.size(), stderr);
    check_output(asked_of(input), output);
    return 0;
}
