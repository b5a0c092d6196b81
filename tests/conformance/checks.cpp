#include "conformance/checks.h"


#include <csignal>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "protocol/engine_process.h"
#include "protocol/fields.h"
#include "protocol/frame_encode.h"
#include "protocol/frames.h"

namespace conformance {
namespace {

namespace proto = inkling::protocol;
using proto::EngineProcess;
using namespace std::chrono_literals;

// What one request produced, in order.
struct Turn {
    bool accepted = false;
    int data_frames = 0;
    std::string text;
    std::optional<proto::Done> done;
    std::optional<proto::Error> error;
    std::vector<std::string> notes;  // anything out of order
};

class Harness {
public:
    explicit Harness(const Options& o) : o_(o) {}

    void report(const std::string& name, bool ok, const std::string& why = {}) {
        if (ok) {
            ++tally_.passed;
            std::printf("PASS %s\n", name.c_str());
        } else {
            ++tally_.failed;
            std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
            if (engine_) std::printf("  engine stderr (last lines):\n%s", engine_->stderr_tail().c_str());
        }
        std::fflush(stdout);
    }

    // A fresh engine; true once READY was read as its first frame.
    bool start(const std::string& tag) {
        engine_ = std::make_unique<EngineProcess>(o_.engine, o_.scratch_dir + "/conformance-" +
                                                                 std::to_string(getpid()) + "-" +
                                                                 tag + ".stderr");
        auto first = next(o_.timeout);
        ready_ = first && std::holds_alternative<proto::Frame>(*first) &&
                 std::holds_alternative<proto::Ready>(std::get<proto::Frame>(*first));
        return ready_;
    }
    EngineProcess& engine() { return *engine_; }

    // Next item; frames that are telemetry (STATS, EVENT) are skipped here.
    std::optional<proto::ReadItem> next(std::chrono::milliseconds timeout) {
        while (true) {
            auto item = engine_->next(timeout);
            if (!item) return item;
            if (auto* p = std::get_if<proto::Problem>(&*item)) {
                ++unparsable_;
                last_problem_ = p->detail;
            }
            if (auto* f = std::get_if<proto::Frame>(&*item)) {
                // CRs inside payloads are the model's text, not framing.
                std::visit(
                    [&](const auto& fr) {
                        if constexpr (requires { fr.bytes; }) payload_crs_ += std::count(fr.bytes.begin(), fr.bytes.end(), '\r');
                        else if constexpr (requires { fr.json; }) payload_crs_ += std::count(fr.json.begin(), fr.json.end(), '\r');
                    },
                    *f);
                if (std::holds_alternative<proto::Stats>(*f) || std::holds_alternative<proto::Event>(*f))
                    continue;
                if (o_.verbose) std::printf("  < %s", proto::encode(*f).substr(0, 120).c_str());
            }
            return item;
        }
    }

    std::string valid_submit(const std::string& id, std::uint64_t max_tokens, int slot = 0) const {
        std::string header = "SUBMIT " + id + " " + std::to_string(slot) + " " +
                             std::to_string(o_.prompt.size()) + " " + std::to_string(max_tokens) +
                             " 0 1";
        if (!o_.keys.empty()) header += " 0 " + o_.keys;
        return header + "\n" + o_.prompt + "\n";
    }

    // Reads until `id` ends (DONE or ERROR). `on_data` may act after each DATA.
    Turn turn(const std::string& id, const std::function<void(Turn&)>& on_data = {}) {
        Turn t;
        while (true) {
            auto item = next(o_.timeout);
            if (!item) {
                t.notes.push_back(engine_->stdout_eof() ? "engine closed stdout" : "timed out");
                return t;
            }
            if (auto* p = std::get_if<proto::Problem>(&*item)) {
                t.notes.push_back("unparsable output: " + p->detail);
                return t;
            }
            const auto& f = std::get<proto::Frame>(*item);
            if (auto* a = std::get_if<proto::Accept>(&f)) {
                if (a->id != id) t.notes.push_back("ACCEPT for other id " + a->id);
                else if (t.accepted) t.notes.push_back("second ACCEPT");
                t.accepted = true;
            } else if (auto* d = std::get_if<proto::Data>(&f)) {
                if (d->id != id) {
                    t.notes.push_back("DATA for other id " + d->id);
                    continue;
                }
                if (!t.accepted) t.notes.push_back("DATA before ACCEPT");
                ++t.data_frames;
                t.text += d->bytes;
                if (on_data) on_data(t);
            } else if (auto* d = std::get_if<proto::Done>(&f)) {
                if (d->id != id) {
                    t.notes.push_back("DONE for other id " + d->id);
                    continue;
                }
                t.done = *d;
                return t;
            } else if (auto* e = std::get_if<proto::Error>(&f)) {
                if (e->id != id) {
                    t.notes.push_back("ERROR for other id " + e->id + " " + std::string(proto::to_string(e->code)));
                    continue;
                }
                t.error = *e;
                return t;
            } else if (!std::holds_alternative<proto::Echo>(f)) {
                t.notes.push_back("unexpected frame " + proto::encode(f).substr(0, 40));
            }
        }
    }

    // A normal request completes: ACCEPT, DATA…, DONE with consistent counts.
    std::string serves(const std::string& id, std::uint64_t max_tokens = 3) {
        if (!engine_->write(valid_submit(id, max_tokens))) return "engine stdin closed";
        Turn t = turn(id);
        if (!t.notes.empty()) return t.notes.front();
        if (t.error) return "ERROR " + std::string(proto::to_string(t.error->code)) + " " + t.error->detail;
        if (!t.accepted) return "no ACCEPT";
        if (!t.done) return "no DONE";
        if (t.done->stat.emitted != static_cast<std::uint64_t>(t.data_frames))
            return "DONE emitted=" + std::to_string(t.done->stat.emitted) + " but " +
                   std::to_string(t.data_frames) + " DATA frames";
        if (t.done->stat.emitted > max_tokens) return "emitted more than max_tokens";
        // length_limited=1 below max_tokens is legal: the context clamps generation.
        return {};
    }

    // `bytes` is malformed: expect ERROR <id> <code> first, then a valid request served.
    void malformed(const std::string& name, const std::string& bytes, const std::string& id,
                   proto::ErrorCode code) {
        std::string after = "after-" + std::to_string(++counter_);
        if (!engine_->write(bytes + valid_submit(after, 2))) return report(name, false, "engine stdin closed");
        auto item = next(o_.timeout);
        if (!item) return report(name, false, "no answer");
        const proto::Error* e = nullptr;
        if (auto* f = std::get_if<proto::Frame>(&*item)) e = std::get_if<proto::Error>(f);
        if (!e) return report(name, false, "first answer is not ERROR");
        if (e->id != id || e->code != code)
            return report(name, false, "got ERROR " + e->id + " " + std::string(proto::to_string(e->code)) +
                                           " " + e->detail + "; want ERROR " + id + " " +
                                           std::string(proto::to_string(code)));
        Turn t = turn(after);
        bool ok = t.notes.empty() && t.accepted && t.done;
        report(name, ok, ok ? "" : "the next valid SUBMIT was not served: " +
                                       (t.notes.empty() ? std::string("no ACCEPT/DONE") : t.notes.front()));
    }

    const Options& o_;
    Tally tally_;
    std::unique_ptr<EngineProcess> engine_;
    bool ready_ = false;
    int unparsable_ = 0;
    std::int64_t payload_crs_ = 0;
    std::string last_problem_;
    int counter_ = 0;
};

std::string header(const std::string& fields) { return "SUBMIT " + fields + "\n"; }

void byte_level_checks(Harness& h) {
    const std::string& raw = h.engine().raw_stdout();
    const auto crs = std::count(raw.begin(), raw.end(), '\r');
    h.report("stdout carries no CR byte outside payloads", crs == h.payload_crs_,
             std::to_string(crs - h.payload_crs_) + " CR byte(s) in framing, first at offset " +
                 std::to_string(raw.find('\r')));
    h.report("every frame on stdout parses", h.unparsable_ == 0, h.last_problem_);
}

void session_checks(Harness& h) {
    using proto::ErrorCode;
    bool ready = h.start("main");
    const std::string& raw = h.engine().raw_stdout();
    h.report("first 10 bytes are the READY sentinel",
             ready && raw.compare(0, proto::kReadySentinel.size(), proto::kReadySentinel) == 0,
             "got '" + proto::printable(raw.substr(0, 16)) + "'");
    if (!ready) return;

    auto why = h.serves("basic-1", 4);
    h.report("a valid SUBMIT gets ACCEPT, DATA..., DONE", why.empty(), why);
    why = h.serves("max-one", 1);
    h.report("max_tokens=1 emits at most one token", why.empty(), why);

    const std::string p = "hello";
    h.malformed("garbage line gets ERROR 0 BAD_REQUEST", "this is not a frame\n", "0", ErrorCode::BadRequest);
    h.malformed("unknown command gets ERROR 0 BAD_REQUEST", "FROB 12\n", "0", ErrorCode::BadRequest);
    h.malformed("oversize header gets ERROR 0 BAD_FRAME", std::string(5000, 'A') + "\n", "0", ErrorCode::BadFrame);
    h.malformed("wrong byte after payload gets BAD_FRAME", header("tb-1 0 5 4 0 1") + p + "X", "tb-1",
                ErrorCode::BadFrame);
    h.malformed("too few SUBMIT fields", "SUBMIT few-1 0 5\n" + p + "\n", "few-1", ErrorCode::BadRequest);
    h.malformed("non-numeric max_tokens", header("nn-1 0 5 many 0 1") + p + "\n", "nn-1", ErrorCode::BadRequest);
    h.malformed("non-numeric bytes (line-only reject)", header("nb-1 0 five 4 0 1"), "nb-1", ErrorCode::BadRequest);
    h.malformed("negative slot", header("ns-1 -1 5 4 0 1") + p + "\n", "ns-1", ErrorCode::BadRequest);
    h.malformed("temperature above 2", header("t-1 0 5 4 2.5 1") + p + "\n", "t-1", ErrorCode::BadRequest);
    h.malformed("temperature nan", header("t-2 0 5 4 nan 1") + p + "\n", "t-2", ErrorCode::BadRequest);
    h.malformed("temperature inf", header("t-3 0 5 4 inf 1") + p + "\n", "t-3", ErrorCode::BadRequest);
    h.malformed("temperature overflow 1e999", header("t-4 0 5 4 1e999 1") + p + "\n", "t-4", ErrorCode::BadRequest);
    h.malformed("temperature hex", header("t-5 0 5 4 0x1 1") + p + "\n", "t-5", ErrorCode::BadRequest);
    h.malformed("top_p 0", header("tp-1 0 5 4 0 0") + p + "\n", "tp-1", ErrorCode::BadRequest);
    h.malformed("top_p above 1", header("tp-2 0 5 4 0 1.5") + p + "\n", "tp-2", ErrorCode::BadRequest);
    h.malformed("max_tokens 0 without logprobs", header("mt-0 0 5 0 0 1") + p + "\n", "mt-0", ErrorCode::BadRequest);
    h.malformed("trailing garbage field", header("tg-1 0 5 4 0 1 0 junk") + p + "\n", "tg-1", ErrorCode::BadRequest);
    h.malformed("unknown key", header("uk-1 0 5 4 0 1 0 frob=1") + p + "\n", "uk-1", ErrorCode::BadRequest);
    h.malformed("duplicate key", header("dk-1 0 5 4 0 1 0 seed=1 seed=2") + p + "\n", "dk-1", ErrorCode::BadRequest);
    h.malformed("grammar longer than the extension", header("gx-1 0 5 4 0 1 2 grammar=3") + p + "{}\n", "gx-1",
                ErrorCode::BadRequest);
    h.malformed("NUL byte in prompt", header("nul-1 0 5 4 0 1") + std::string("he\0lo", 5) + "\n", "nul-1",
                ErrorCode::BadRequest);
    h.malformed("non-numeric extension length", header("xb-1 0 5 4 0 1 lots") + p + "\n", "xb-1",
                ErrorCode::BadRequest);
    h.malformed("id of 64 characters", header(std::string(64, 'i') + " 0 5 4 0 1") + p + "\n", "0",
                ErrorCode::BadRequest);
    h.malformed("slot beyond the engine's slots", header("sl-1 65535 5 4 0 1") + p + "\n", "sl-1",
                ErrorCode::BadRequest);
    h.malformed("prompt over 16 MiB is refused and skipped",
                header("big-1 0 16777217 4 0 1") + std::string(16777217, 'a') + "\n", "big-1",
                ErrorCode::BadRequest);
    h.malformed("extension over 64 MiB is refused and skipped",
                header("bigx-1 0 5 4 0 1 67108865") + p + std::string(67108865, '\x03') + "\n", "bigx-1",
                ErrorCode::BadRequest);
    h.malformed("empty prompt gets EMPTY_PROMPT", header("empty-1 0 0 4 0 1") + "\n", "empty-1",
                ErrorCode::EmptyPrompt);
    h.malformed("STOP without id", "STOP\n", "0", ErrorCode::BadRequest);
    h.malformed("STOP for unknown id gets NOT_FOUND", "STOP nobody\n", "nobody", ErrorCode::NotFound);
    h.malformed("CANCEL for unknown id gets NOT_FOUND", "CANCEL nobody\n", "nobody", ErrorCode::NotFound);

    why = h.serves(std::string(63, 'k'), 2);
    h.report("an id of 63 characters is served", why.empty(), why);

    {  // A SUBMIT written one byte at a time.
        std::string bytes = h.valid_submit("split-1", 2);
        bool ok = true;
        for (char c : bytes) {
            ok = ok && h.engine().write(std::string_view(&c, 1));
            std::this_thread::sleep_for(1ms);
        }
        Turn t = h.turn("split-1");
        h.report("a SUBMIT split into 1-byte writes is served", ok && t.notes.empty() && t.done,
                 t.notes.empty() ? "no DONE" : t.notes.front());
    }

    {  // Duplicate id, slot busy and STOP, around one long request.
        h.engine().write(h.valid_submit("long-1", 100000));
        bool stopped = false, duplicate_ok = false, busy_ok = false;
        std::string detail;
        Turn t = h.turn("long-1", [&](Turn&) {
            if (stopped) return;
            stopped = true;
            h.engine().write(h.valid_submit("long-1", 4, 0));
            auto e1 = h.next(h.o_.timeout);
            while (e1 && std::holds_alternative<proto::Frame>(*e1) &&
                   std::holds_alternative<proto::Data>(std::get<proto::Frame>(*e1)))
                e1 = h.next(h.o_.timeout);
            if (e1 && std::holds_alternative<proto::Frame>(*e1)) {
                if (auto* e = std::get_if<proto::Error>(&std::get<proto::Frame>(*e1)))
                    duplicate_ok = e->id == "long-1" && e->code == proto::ErrorCode::DuplicateId,
                    detail = e->id + " " + std::string(proto::to_string(e->code));
            }
            h.engine().write(h.valid_submit("busy-1", 4, 0));
            auto e2 = h.next(h.o_.timeout);
            while (e2 && std::holds_alternative<proto::Frame>(*e2) &&
                   std::holds_alternative<proto::Data>(std::get<proto::Frame>(*e2)))
                e2 = h.next(h.o_.timeout);
            if (e2 && std::holds_alternative<proto::Frame>(*e2)) {
                if (auto* e = std::get_if<proto::Error>(&std::get<proto::Frame>(*e2)))
                    busy_ok = e->id == "busy-1" && e->code == proto::ErrorCode::SlotBusy;
            }
            h.engine().write("STOP long-1\n");
        });
        h.report("a second SUBMIT with an in-flight id gets DUPLICATE_ID", duplicate_ok, "got " + detail);
        h.report("a SUBMIT on a busy slot gets SLOT_BUSY", busy_ok, "no SLOT_BUSY");
        bool stop_ok = t.done && !t.done->stat.length_limited && t.done->stat.emitted < 100000;
        h.report("STOP ends the turn through DONE", stop_ok,
                 t.error ? "got ERROR " + std::string(proto::to_string(t.error->code))
                         : (t.notes.empty() ? "no DONE" : t.notes.front()));
        why = h.serves("after-stop", 2);
        h.report("no DATA after DONE; the engine serves on", why.empty(), why);
    }

    {  // Frames naming a request in flight that the engine refuses: a malformed one gets
       // ERROR 0, a SUBMIT with a bad slot DUPLICATE_ID, and the request goes on (an ERROR
       // with its id, other than DUPLICATE_ID, would end it for the client).
        h.engine().write(h.valid_submit("named-1", 100000));
        bool sent = false;
        std::string got = "nothing", got_slot = "nothing";
        auto next_error = [&] {
            auto item = h.next(h.o_.timeout);
            while (item && std::holds_alternative<proto::Frame>(*item) &&
                   std::holds_alternative<proto::Data>(std::get<proto::Frame>(*item)))
                item = h.next(h.o_.timeout);
            if (item && std::holds_alternative<proto::Frame>(*item))
                if (auto* e = std::get_if<proto::Error>(&std::get<proto::Frame>(*item)))
                    return "ERROR " + e->id + " " + std::string(proto::to_string(e->code));
            return std::string("no ERROR");
        };
        Turn t = h.turn("named-1", [&](Turn&) {
            if (sent) return;
            sent = true;
            h.engine().write("STOP named-1 extra\n");
            got = next_error();
            h.engine().write(h.valid_submit("named-1", 2, 65535));
            got_slot = next_error();
            h.engine().write("STOP named-1\n");
        });
        const std::string ended = (t.done ? "" : ", no DONE") + (t.notes.empty() ? "" : ", " + t.notes.front());
        h.report("a malformed frame naming a request in flight gets ERROR 0; the request goes on",
                 got == "ERROR 0 BAD_REQUEST" && t.done && t.notes.empty(), "got " + got + ended);
        h.report("a SUBMIT with an id in flight and a bad slot gets DUPLICATE_ID",
                 got_slot == "ERROR named-1 DUPLICATE_ID" && t.done && t.notes.empty(), "got " + got_slot + ended);
    }

    {  // CANCEL.
        h.engine().write(h.valid_submit("cancel-1", 100000));
        bool sent = false;
        Turn t = h.turn("cancel-1", [&](Turn&) {
            if (!sent) h.engine().write("CANCEL cancel-1\n");
            sent = true;
        });
        h.report("CANCEL is acknowledged with ERROR <id> CANCELLED",
                 t.error && t.error->code == proto::ErrorCode::Cancelled && !t.done,
                 t.done ? "got DONE" : (t.notes.empty() ? "no CANCELLED" : t.notes.front()));
        why = h.serves("after-cancel", 2);
        h.report("after CANCEL the engine serves on", why.empty(), why);
    }

    h.engine().close_stdin();
    h.engine().drain_to_eof(h.o_.timeout);
    byte_level_checks(h);
}

// A malformed frame and the ERROR it must draw.
struct Bad {
    std::string bytes, id;
    proto::ErrorCode code;
};

Bad random_bad(std::mt19937& rng, int n) {
    const std::string id = "m" + std::to_string(n), p = "hello";
    using proto::ErrorCode;
    switch (rng() % 12) {
    case 0: {
        std::string junk = "X";
        for (int i = 0, len = 1 + static_cast<int>(rng() % 60); i < len; ++i) junk += static_cast<char>(1 + rng() % 255);
        std::erase(junk, '\n');
        return {junk + "\n", "0", ErrorCode::BadRequest};
    }
    case 1: return {std::string(4097 + rng() % 3000, 'Z') + "\n", "0", ErrorCode::BadFrame};
    case 2: return {"SUBMIT " + id + " 0 5 4 3.5 1\n" + p + "\n", id, ErrorCode::BadRequest};
    case 3: return {"SUBMIT " + id + " 0 5 4 0 1\n" + p + "Q", id, ErrorCode::BadFrame};
    case 4: return {"SUBMIT " + id + " 0 5 4 0 1\n" + std::string("he\0lo", 5) + "\n", id, ErrorCode::BadRequest};
    case 5: return {"SUBMIT " + id + " 0 5 4 0 1 0 nope=1\n" + p + "\n", id, ErrorCode::BadRequest};
    case 6: return {"SUBMIT " + id + " 0 5 0 0 1\n" + p + "\n", id, ErrorCode::BadRequest};
    case 7: return {"SUBMIT " + id + " 0 x 4 0 1\n", id, ErrorCode::BadRequest};
    case 8: return {"STOP " + id + "\n", id, ErrorCode::NotFound};
    case 9: return {"CANCEL " + id + "\n", id, ErrorCode::NotFound};
    case 10: return {"SUBMIT " + id + " 0 0 4 0 1\n\n", id, ErrorCode::EmptyPrompt};
    default: return {"STOP a b c\n", "a", ErrorCode::BadRequest};
    }
}

// Thousands of frames, valid and malformed, against one running engine.
void stress_checks(Harness& h, int frames) {
    if (frames <= 0) return;
    if (!h.start("stress")) return h.report("random stream: engine starts", false, "no READY");
    std::mt19937 rng(20261129);
    int valid = 0, completed = 0, bad_total = 0, bad_answered = 0;
    std::string first_failure;
    for (int sent = 0; sent < frames;) {
        // A few malformed frames, then one valid request, in one write.
        std::vector<Bad> bads;
        std::string bytes;
        for (int i = 0, k = static_cast<int>(rng() % 4); i < k && sent < frames; ++i, ++sent) {
            bads.push_back(random_bad(rng, sent));
            bytes += bads.back().bytes;
        }
        const std::string id = "v" + std::to_string(sent++);
        bytes += h.valid_submit(id, 1 + rng() % 3);
        ++valid;
        bad_total += static_cast<int>(bads.size());
        if (!h.engine().write(bytes)) {
            first_failure = "engine stdin closed after " + std::to_string(sent) + " frames";
            break;
        }
        std::size_t next_bad = 0;
        bool done = false;
        while (!done) {
            auto item = h.next(h.o_.timeout);
            if (!item || std::holds_alternative<proto::Problem>(*item)) {
                first_failure = "no answer or unparsable output after " + std::to_string(sent) + " frames";
                break;
            }
            const auto& f = std::get<proto::Frame>(*item);
            if (const auto* e = std::get_if<proto::Error>(&f)) {
                if (e->id == id) {
                    first_failure = "valid request " + id + " got ERROR " + std::string(proto::to_string(e->code));
                    done = true;
                } else if (next_bad < bads.size() && e->id == bads[next_bad].id && e->code == bads[next_bad].code) {
                    ++next_bad;
                    ++bad_answered;
                } else if (first_failure.empty()) {
                    first_failure = "unexpected ERROR " + e->id + " " + std::string(proto::to_string(e->code)) +
                                    (next_bad < bads.size() ? " (wanted " + bads[next_bad].id + " " +
                                                                  std::string(proto::to_string(bads[next_bad].code)) + ")"
                                                            : "");
                }
            } else if (const auto* d = std::get_if<proto::Done>(&f); d && d->id == id) {
                ++completed;
                done = true;
            }
        }
        if (!done) break;
    }
    h.report("random stream of " + std::to_string(frames) + " frames: every valid request completes",
             completed == valid && first_failure.empty(),
             std::to_string(completed) + "/" + std::to_string(valid) + " completed; " + first_failure);
    h.report("random stream: every malformed frame gets its ERROR", bad_answered == bad_total,
             std::to_string(bad_answered) + "/" + std::to_string(bad_total) + " answered");
    h.engine().close_stdin();
    auto status = h.engine().wait_exit(h.o_.timeout);
    h.report("random stream: the engine exits 0 at EOF", status && status->exited_zero(),
             status ? "it " + status->describe() : "did not exit");
}

void eof_checks(Harness& h) {
    if (!h.start("eof")) return h.report("EOF finishes in-flight work and exits 0", false, "no READY");
    h.engine().write(h.valid_submit("eof-1", 8));
    h.engine().close_stdin();
    Turn t = h.turn("eof-1");
    bool closed = h.engine().drain_to_eof(h.o_.timeout);
    auto status = h.engine().wait_exit(h.o_.timeout);
    bool exit0 = status && status->exited_zero();
    h.report("EOF finishes in-flight work and exits 0", t.done && closed && exit0,
             !t.done ? "request did not finish" : !exit0 ? "exit status not 0" : "stdout not closed");

    // SIGTERM, or the signal --stop-signal names (SIGINT for an engine under Wine, which
    // turns it into the CTRL_C_EVENT a Windows engine takes as its stop request).
    const std::string stop = h.o_.stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
    if (!h.start("sigterm")) return h.report(stop + " finishes in-flight work and exits 0", false, "no READY");
    h.engine().write(h.valid_submit("term-1", 40));
    bool signalled = false;
    Turn tt = h.turn("term-1", [&](Turn&) {
        if (!signalled) h.engine().signal(h.o_.stop_signal);
        signalled = true;
    });
    status = h.engine().wait_exit(h.o_.timeout);
    exit0 = status && status->exited_zero();
    h.report(stop + " finishes in-flight work and exits 0", tt.done.has_value() && exit0,
             !tt.done ? "request did not finish" : "exit status not 0");

    if (!h.start("trunc")) return h.report("EOF inside a payload gets BAD_FRAME", false, "no READY");
    h.engine().write("SUBMIT trunc-1 0 100 4 0 1\n0123456789");
    h.engine().close_stdin();
    auto item = h.next(h.o_.timeout);
    const proto::Error* e = nullptr;
    if (item && std::holds_alternative<proto::Frame>(*item))
        e = std::get_if<proto::Error>(&std::get<proto::Frame>(*item));
    status = h.engine().wait_exit(h.o_.timeout);
    exit0 = status && status->exited_zero();
    h.report("EOF inside a payload gets BAD_FRAME, then exit 0",
             e && e->id == "trunc-1" && e->code == proto::ErrorCode::BadFrame && exit0,
             e ? "got " + e->id + " " + std::string(proto::to_string(e->code)) : "no ERROR");
}

}  // namespace

Tally run_all_checks(const Options& options) {
    Harness h(options);
    session_checks(h);
    eof_checks(h);
    stress_checks(h, options.stress_frames);
    return h.tally_;
}

}  // namespace conformance
