// The engine's life in scenarios (gateway/engines/engine_life.h), driven in-process by a scripted
// fake engine and a stepped clock: kill before and after ACCEPT, an engine that hangs, a
// slow load that reports progress, a device lost under continuous load, a crash loop, a
// poison request, shutdown. No process, no sleep: time moves only when a case moves it.
#include <doctest/doctest.h>

#include <deque>
#include <variant>

#include "gateway/engines/engine_life.h"
#include "gateway/metrics.h"
#include "protocol/frame_encode.h"
#include "protocol/frame_reader.h"

using namespace inkling;
using namespace inkling::gateway;
using namespace std::chrono_literals;
using Time = EngineLife::Time;
using State = EngineLife::State;

namespace {

// What the fake engine does; the knobs apply to the engines started after they are set.
struct Script {
    bool spawn_fails = false;
    bool sends_ready = true;
    bool answers_stats = true;
    bool accepts = true;        // SUBMIT → ACCEPT (false: says nothing)
    bool finishes = true;       // after ACCEPT: one DATA and DONE at once (false: holds it)
    std::string poison;         // a SUBMIT with this prompt kills the engine (SIGSEGV) before ACCEPT
    int exit_status_at_start = -1;  // >= 0: exits with it right after starting (before READY)
    bool exits_at_eof = true;   // EOF on stdin with nothing held → exit 0
};

class FakeEngine : public EngineLink {
public:
    Script script;
    int spawns = 0, kills = 0;
    bool alive = false, input_closed = false;
    std::vector<protocol::Frame> received;   // every frame the gateway sent, all engines
    std::vector<std::string> held;           // accepted, not finished
    // What the engine does next, delivered by Rig::pump (never inside a call into EngineLife).
    std::deque<std::variant<std::string, EngineExit>> pending;

    bool spawn(std::string& error) override {
        if (script.spawn_fails) {
            error = "no such file";
            return false;
        }
        ++spawns;
        alive = true;
        input_closed = false;
        held.clear();
        reader_ = protocol::FrameReader(protocol::Direction::ToEngine);
        if (script.exit_status_at_start >= 0) die(EngineExit{false, script.exit_status_at_start});
        else if (script.sends_ready) say(protocol::Ready{});
        return true;
    }
    void write(std::string bytes) override {
        if (!alive || input_closed) return;
        reader_.feed(bytes);
        while (auto item = reader_.next()) {
            REQUIRE(std::holds_alternative<protocol::Frame>(*item));
            const auto& f = std::get<protocol::Frame>(*item);
            received.push_back(f);
            answer(f);
        }
    }
    void close_input() override {
        input_closed = true;
        if (alive && held.empty() && script.exits_at_eof) die(EngineExit{false, 0});
    }
    void kill() override {
        ++kills;
        if (alive) die(EngineExit{true, 9});
    }
    long pid() const override { return alive ? 1000 + spawns : 0; }

    void say(const protocol::Frame& f) { pending.push_back(protocol::encode(f)); }
    void die(EngineExit e) {
        alive = false;
        pending.push_back(e);
    }
    // Ends every held request (DATA + DONE), as an engine that finished its work.
    void finish_held() {
        for (const auto& id : held) finish(id);
        held.clear();
        if (input_closed && alive && script.exits_at_eof) die(EngineExit{false, 0});
    }
    int submits() const {
        int n = 0;
        for (const auto& f : received) n += std::holds_alternative<protocol::Submit>(f);
        return n;
    }
    int stats_requests() const {
        int n = 0;
        for (const auto& f : received) n += std::holds_alternative<protocol::StatsRequest>(f);
        return n;
    }

private:
    void finish(const std::string& id) {
        protocol::Data data;
        data.id = id;
        data.bytes = "ok";
        say(data);
        protocol::Done d;
        d.id = id;
        d.stat.emitted = 1;
        say(d);
    }
    void answer(const protocol::Frame& f) {
        if (const auto* s = std::get_if<protocol::Submit>(&f)) {
            if (!script.poison.empty() && s->prompt == script.poison) return die(EngineExit{true, 11});
            if (!script.accepts) return;
            protocol::Accept a;
            a.id = s->id;
            a.prompt_tokens = 3;
            say(a);
            if (script.finishes) finish(s->id);
            else held.push_back(s->id);
        } else if (std::holds_alternative<protocol::StatsRequest>(f)) {
            if (script.answers_stats) say(protocol::Stats{R"({"kind":"stats"})"});
        } else if (const auto* c = std::get_if<protocol::Cancel>(&f)) {
            std::erase(held, c->id);
            say(protocol::Error{c->id, protocol::ErrorCode::Cancelled, "cancelled"});
        }
    }
    protocol::FrameReader reader_{protocol::Direction::ToEngine};
};

struct Recording : RequestSink {
    std::vector<EngineEvent> events;
    void push(EngineEvent e) override { events.push_back(std::move(e)); }
    template <class T>
    int count() const {
        int n = 0;
        for (const auto& e : events) n += std::holds_alternative<T>(e);
        return n;
    }
    bool died() const { return count<EngineDied>() > 0; }
    bool done() const { return count<protocol::Done>() > 0; }
};

EngineLife::Options quick_options() {
    EngineLife::Options o;
    o.backoff_first = 250ms;
    o.backoff_max = 2000ms;
    o.settle = 5000ms;
    o.crash_loop_limit = 3;
    o.ping = 5000ms;
    o.deadline = 15000ms;
    o.start_deadline = 60000ms;
    o.drain_deadline = 30000ms;
    o.stop_deadline = 10000ms;
    return o;
}

struct Rig {
    explicit Rig(EngineLife::Options o = quick_options()) : life(engine, o, metrics) {
        life.log = [this](const std::string& line) { log.push_back(line); };
    }
    FakeEngine engine;
    Metrics metrics;
    EngineLife life;
    Time now = Time{} + 1000h;
    std::vector<std::string> log;

    // Delivers what the fake engine said or did, in order, until it has nothing more.
    void pump() {
        while (!engine.pending.empty()) {
            auto next = std::move(engine.pending.front());
            engine.pending.pop_front();
            if (auto* bytes = std::get_if<std::string>(&next)) life.on_output(now, *bytes);
            else life.on_exit(now, std::get<EngineExit>(next));
        }
    }
    // Moves the clock by `d`, running every deadline that falls inside, in order.
    void advance(std::chrono::milliseconds d) {
        const Time until = now + d;
        pump();
        for (int guard = 0; guard < 100000 && life.next_tick() <= until; ++guard) {
            now = std::max(now, life.next_tick());
            life.tick(now);
            pump();
        }
        now = until;
        life.tick(now);
        pump();
    }
    void start() {
        life.start(now);
        pump();
    }
    std::shared_ptr<Recording> submit(std::string prompt = "hi") {
        auto sink = std::make_shared<Recording>();
        protocol::Submit s;
        s.prompt = std::move(prompt);
        s.max_tokens = 4;
        last_id = life.submit(s, sink);
        pump();
        return sink;
    }
    void say(const protocol::Frame& f) {
        life.on_output(now, protocol::encode(f));
        pump();
    }
    // Every "a -> b" transition the log recorded, as "a->b".
    std::vector<std::string> transitions() const {
        std::vector<std::string> t;
        for (const auto& line : log) {
            const auto arrow = line.find(" -> ");
            if (line.rfind("[engine] ", 0) != 0 || arrow == std::string::npos) continue;
            const auto from = line.substr(9, arrow - 9);
            auto to = line.substr(arrow + 4);
            to = to.substr(0, to.find(':'));
            t.push_back(from + "->" + to);
        }
        return t;
    }
    bool logged(const std::string& part) const {
        for (const auto& line : log)
            if (line.find(part) != std::string::npos) return true;
        return false;
    }
    std::string last_id;
};

}  // namespace

TEST_CASE("engine life: start, READY, serve; one log line per transition") {
    Rig r;
    r.start();
    CHECK(r.life.state() == State::Ready);
    CHECK(r.life.admitting());
    auto s = r.submit();
    CHECK(s->count<protocol::Accept>() == 1);
    CHECK(s->done());
    CHECK(r.life.in_flight() == 0);  // DONE ends the id
    CHECK(r.transitions() == std::vector<std::string>{"stopped->starting", "starting->ready"});
}

TEST_CASE("engine life: killed before ACCEPT, the request hears so (retryable) and a new engine starts at once") {
    Rig r;
    r.engine.script.accepts = false;
    r.start();
    auto s = r.submit();
    REQUIRE(s->events.empty());
    r.engine.kill();  // kill -9 from outside
    r.pump();
    REQUIRE(s->died());
    CHECK_FALSE(std::get<EngineDied>(s->events.back()).accepted);
    CHECK(std::get<EngineDied>(s->events.back()).reason.find("killed by signal 9") != std::string::npos);
    // Died while serving: blamed on the work, so no backoff and no crash-loop count.
    CHECK(r.life.state() == State::Restarting);
    CHECK(r.life.reason().find("restarting now") != std::string::npos);
    r.engine.script.accepts = true;
    r.advance(0ms);
    CHECK(r.engine.spawns == 2);
    CHECK(r.life.state() == State::Ready);
    CHECK(r.life.restarts() == 1);
    CHECK(r.metrics.engine_restarts.value == 1);
    CHECK(r.submit()->done());
}

TEST_CASE("engine life: killed after ACCEPT, the request hears it was accepted") {
    Rig r;
    r.engine.script.finishes = false;
    r.start();
    auto s = r.submit();
    REQUIRE(s->count<protocol::Accept>() == 1);
    r.engine.kill();
    r.pump();
    REQUIRE(s->died());
    CHECK(std::get<EngineDied>(s->events.back()).accepted);
    CHECK(r.life.in_flight() == 0);
    CHECK(r.transitions().back() == "dead->restarting");
}

TEST_CASE("engine life: a hung engine (no answer to STATS) is unresponsive, killed and restarted") {
    Rig r;
    r.start();
    r.engine.script.answers_stats = false;  // kill -STOP: it reads nothing, says nothing
    r.advance(4999ms);
    CHECK(r.engine.stats_requests() == 0);
    r.advance(1ms);
    CHECK(r.engine.stats_requests() == 1);  // the ping, at `ping`
    r.advance(14999ms);
    CHECK(r.life.state() == State::Ready);  // the deadline has not passed yet
    CHECK(r.engine.kills == 0);
    r.engine.script.answers_stats = true;   // the next engine is healthy
    r.advance(1ms);
    CHECK(r.engine.kills == 1);
    const auto t = r.transitions();
    CHECK(std::find(t.begin(), t.end(), "ready->unresponsive") != t.end());
    CHECK(std::find(t.begin(), t.end(), "unresponsive->dead") != t.end());
    CHECK(r.life.state() == State::Ready);  // restarted
    CHECK(r.engine.spawns == 2);
    // A healthy engine answers every ping and is never killed.
    r.advance(120s);
    CHECK(r.engine.kills == 1);
    CHECK(r.engine.stats_requests() >= 20);
}

TEST_CASE("engine life: a slow load that reports progress is given time; a stalled one is killed") {
    Rig r;  // start_deadline 60 s
    r.engine.script.sends_ready = false;
    r.start();
    CHECK(r.life.state() == State::Starting);
    // Five minutes of loading, a progress EVENT every 50 s: never killed.
    for (int i = 1; i <= 6; ++i) {
        r.advance(50s);
        r.say(protocol::Event{R"({"kind":"load_progress","stage":"weights","done":)" + std::to_string(i) +
                              R"(,"total":10})"});
    }
    CHECK(r.engine.kills == 0);
    CHECK(r.life.state() == State::Starting);
    CHECK(r.life.load_progress()["done"] == 6);
    CHECK_FALSE(r.life.admitting());
    // Progress stops: 60 s later it is unresponsive.
    r.advance(59999ms);
    CHECK(r.engine.kills == 0);
    r.engine.script.sends_ready = true;
    r.advance(1ms);
    CHECK(r.engine.kills == 1);
    CHECK(r.logged("no READY and no load progress within 60.0 s"));
    // Died before READY: a quick death, so the next start waits the first backoff.
    CHECK(r.life.state() == State::Restarting);
    CHECK(r.life.seconds_to_next_attempt(r.now) == doctest::Approx(0.25));
    r.advance(250ms);
    CHECK(r.life.state() == State::Ready);
    CHECK(r.life.load_progress().empty());
}

TEST_CASE("engine life: a device lost under continuous load drains, restarts, and admits the waiting requests") {
    Rig r;
    r.engine.script.finishes = false;
    r.start();
    auto a = r.submit(), b = r.submit();
    REQUIRE(r.engine.held.size() == 2);
    r.say(protocol::Event{R"({"kind":"device_lost","detail":"VK_ERROR_DEVICE_LOST"})"});
    CHECK(r.life.state() == State::Draining);
    CHECK(r.life.device_losses() == 1);
    CHECK(r.metrics.device_losses.value == 1);
    CHECK(r.life.reason().find("2 request(s) in flight") != std::string::npos);
    // New requests keep coming: none is admitted, so the engine can drain.
    for (int i = 0; i < 5; ++i) {
        CHECK_FALSE(r.life.admitting());
        CHECK_FALSE(r.life.refusing());  // they wait, they are not refused
        r.advance(1s);
    }
    CHECK(r.engine.submits() == 2);
    CHECK_FALSE(r.engine.input_closed);
    // The two in flight finish: the engine gets EOF, exits 0, restarts at once.
    r.engine.finish_held();
    r.pump();
    CHECK(a->done());
    CHECK(b->done());
    r.life.release(r.last_id);
    r.pump();
    CHECK(r.engine.spawns == 1);
    r.advance(0ms);
    CHECK(r.engine.spawns == 2);
    CHECK(r.life.state() == State::Ready);
    CHECK(r.life.admitting());
    const auto t = r.transitions();
    CHECK(std::find(t.begin(), t.end(), "ready->draining") != t.end());
    CHECK(std::find(t.begin(), t.end(), "draining->dead") != t.end());
    CHECK(r.life.reason().empty());
}

TEST_CASE("engine life: a drain whose requests never finish ends at the drain deadline, not never") {
    Rig r;  // drain_deadline 30 s
    r.engine.script.finishes = false;
    r.start();
    auto a = r.submit();
    r.say(protocol::Event{R"({"kind":"restart_advised","detail":"tier"})"});
    REQUIRE(r.life.state() == State::Draining);
    r.advance(29999ms);
    CHECK(r.engine.kills == 0);
    r.advance(1ms);
    CHECK(r.engine.kills == 1);
    REQUIRE(a->died());
    CHECK(std::get<EngineDied>(a->events.back()).accepted);
    // A planned end: restarted at once, not counted as a crash.
    r.engine.script.finishes = true;
    r.advance(0ms);
    CHECK(r.life.state() == State::Ready);
    CHECK(r.engine.spawns == 2);
}

TEST_CASE("engine life: a crash loop backs off, says failed with why and when, and never gives up") {
    Rig r;  // backoff 250 ms doubling to 2 s, limit 3
    r.engine.script.exit_status_at_start = 1;
    r.life.start(r.now);  // the fake's exit is pending: its last words come first
    r.life.on_stderr("error: model.safetensors: no such file\n");
    r.pump();
    CHECK(r.life.state() == State::Restarting);
    CHECK(r.life.reason().find("its last stderr line: error: model.safetensors: no such file") != std::string::npos);
    CHECK(r.life.seconds_to_next_attempt(r.now) == doctest::Approx(0.25));
    r.advance(250ms);  // second start, dies at once
    CHECK(r.engine.spawns == 2);
    CHECK(r.life.state() == State::Restarting);
    CHECK(r.life.seconds_to_next_attempt(r.now) == doctest::Approx(0.5));
    r.advance(500ms);  // third
    CHECK(r.engine.spawns == 3);
    CHECK(r.life.state() == State::Failed);
    CHECK(r.life.refusing());
    CHECK(r.life.reason().find("crash loop: 3 deaths in a row") != std::string::npos);
    CHECK(r.life.reason().find("next attempt in 1.0 s") != std::string::npos);
    // It keeps trying, at most backoff_max apart, for as long as it takes.
    r.advance(60s);
    CHECK(r.engine.spawns >= 3 + 60 / 2 - 2);
    CHECK(r.life.state() == State::Failed);
    CHECK(r.life.seconds_to_next_attempt(r.now) <= 2.0);
    // The cause is fixed: the next start comes up and stays up.
    r.engine.script.exit_status_at_start = -1;
    r.advance(2s);
    CHECK(r.life.state() == State::Ready);
    CHECK_FALSE(r.life.refusing());
}

TEST_CASE("engine life: engines that die after serving a while restart at once, never failed") {
    Rig r;
    r.start();
    for (int i = 0; i < 10; ++i) {
        r.advance(7s);  // kill -9 every 7 s (longer than settle)
        r.engine.kill();
        r.pump();
        CHECK(r.life.state() == State::Restarting);
        r.advance(0ms);
        CHECK(r.life.state() == State::Ready);
    }
    CHECK(r.engine.spawns == 11);
    const auto t = r.transitions();
    CHECK(std::find(t.begin(), t.end(), "restarting->failed") == t.end());
    CHECK(std::find(t.begin(), t.end(), "dead->failed") == t.end());
}

TEST_CASE("engine life: a poison request kills every engine it reaches; the engine is never marked failed") {
    Rig r;
    r.engine.script.poison = "poison";
    r.start();
    // The generation driver retries a request that died before ACCEPT (o_.retries, 3):
    // each attempt kills a fresh engine within a second of its READY.
    for (int attempt = 0; attempt < 3; ++attempt) {
        REQUIRE(r.life.admitting());
        auto s = r.submit("poison");
        REQUIRE(s->died());
        CHECK_FALSE(std::get<EngineDied>(s->events.back()).accepted);
        CHECK(r.life.state() == State::Restarting);  // not Failed
        r.advance(0ms);                              // restarted at once
    }
    CHECK(r.engine.spawns == 4);
    CHECK(r.life.state() == State::Ready);
    // Everyone else is served.
    CHECK(r.submit("hello")->done());
    const auto t = r.transitions();
    CHECK(std::find(t.begin(), t.end(), "dead->failed") == t.end());
}

TEST_CASE("engine life: shutdown lets the engine finish, refuses new work, then stops") {
    Rig r;
    r.engine.script.finishes = false;
    r.start();
    auto a = r.submit();
    r.life.shutdown(r.now);
    r.pump();
    CHECK(r.engine.input_closed);
    CHECK(r.life.refusing());
    CHECK_FALSE(r.life.admitting());
    auto late = r.submit();
    CHECK(late->died());  // an explicit end, never a hang
    r.engine.finish_held();
    r.pump();
    CHECK(a->done());
    CHECK(r.life.state() == State::Stopped);
    CHECK(r.engine.spawns == 1);  // and no restart
    r.advance(60s);
    CHECK(r.engine.spawns == 1);
}

TEST_CASE("engine life: a stopped engine reloads (an unloaded model's next request): admitting again, counts kept") {
    Rig r;
    r.start();
    r.life.shutdown(r.now);
    r.pump();
    REQUIRE(r.life.state() == State::Stopped);
    CHECK(r.life.stopping());
    r.life.reload(r.now);
    r.pump();
    CHECK(r.engine.spawns == 2);
    CHECK(r.life.state() == State::Ready);
    CHECK_FALSE(r.life.stopping());
    CHECK(r.life.admitting());
    CHECK(r.life.restarts() == 0);  // an unload and a load are no restart
    CHECK(r.submit()->done());
    // Running, reload does nothing; a crash after it restarts as before.
    r.life.reload(r.now);
    CHECK(r.engine.spawns == 2);
    r.advance(10s);
    r.engine.kill();
    r.pump();
    r.advance(1s);
    CHECK(r.engine.spawns == 3);
    CHECK(r.life.state() == State::Ready);
}

TEST_CASE("engine life: an engine that does not exit after shutdown is killed at the stop deadline") {
    Rig r;
    r.engine.script.finishes = false;
    r.start();
    r.submit();
    r.life.shutdown(r.now);
    r.advance(9999ms);
    CHECK(r.engine.kills == 0);
    r.advance(1ms);
    CHECK(r.engine.kills == 1);
    CHECK(r.life.state() == State::Stopped);
}

TEST_CASE("engine life: what the engine writes that breaks the wire gets it killed") {
    SUBCASE("bytes before READY that are no frame") {
        Rig r;
        r.engine.script.sends_ready = false;
        r.start();
        r.say(protocol::Ready{});  // fine on its own …
        Rig q;
        q.engine.script.sends_ready = false;
        q.start();
        q.life.on_output(q.now, "loaded in 3 s\n");  // … a preamble is not
        q.pump();
        CHECK(q.engine.kills == 1);
        CHECK(q.logged("does not start with the READY sentinel"));
    }
    SUBCASE("a load EVENT before READY is allowed") {
        Rig r;
        r.engine.script.sends_ready = false;
        r.start();
        r.say(protocol::Event{R"({"kind":"load_progress","stage":"config"})"});
        r.say(protocol::Ready{});
        CHECK(r.engine.kills == 0);
        CHECK(r.life.state() == State::Ready);
    }
    SUBCASE("an ACCEPT before READY") {
        Rig r;
        r.engine.script.sends_ready = false;
        r.start();
        r.say(protocol::Event{R"({"kind":"load_progress"})"});
        protocol::Accept a;
        a.id = "g1";
        r.say(a);
        CHECK(r.engine.kills == 1);
    }
    SUBCASE("a malformed frame after READY") {
        Rig r;
        r.start();
        r.life.on_output(r.now, "DATA g1 99999999999\n");
        r.pump();
        CHECK(r.engine.kills == 1);
        CHECK(r.logged("malformed frame from the engine"));
    }
    SUBCASE("JSON of the wrong shape is logged and ignored, the engine lives") {
        Rig r;
        r.start();
        r.say(protocol::Stats{R"([1,2])"});
        r.say(protocol::Event{R"({"kind":7})"});
        CHECK(r.engine.kills == 0);
        CHECK(r.life.state() == State::Ready);
        CHECK(r.logged("not a JSON object"));
    }
}

TEST_CASE("engine life: a binary that cannot be started is a quick death, retried") {
    Rig r;
    r.engine.script.spawn_fails = true;
    r.start();
    CHECK(r.life.state() == State::Restarting);
    CHECK(r.life.reason().find("could not be started: no such file") != std::string::npos);
    r.engine.script.spawn_fails = false;
    r.advance(250ms);
    CHECK(r.life.state() == State::Ready);
}

TEST_CASE("engine life: the stderr tail is bounded and the last line explains a death") {
    Rig r;
    r.start();
    for (int i = 0; i < 200; ++i) r.life.on_stderr("line " + std::to_string(i) + "\n");
    r.life.on_stderr(std::string(5000, 'x') + "\n");
    r.life.on_stderr("fatal: out of memory");  // no newline: flushed at the exit
    CHECK(r.life.stderr_tail().size() == EngineLife::kStderrTailLines);
    CHECK(r.life.stderr_tail().back().size() == EngineLife::kStderrLineBytes + std::string(" [...]").size());
    r.engine.kill();
    r.pump();
    CHECK(r.life.last_stderr() == "fatal: out of memory");
    CHECK(r.life.reason().find("its last stderr line: fatal: out of memory") != std::string::npos);
}
