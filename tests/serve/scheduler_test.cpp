// The serve core driven in-process: concurrent sessions, prefix reuse, pinned snapshots,
// cancellation, limits and read-outs, each compared with what a fresh engine produces.
#include <doctest/doctest.h>

#include <fstream>
#include <map>

#include "engine/serve/scheduler.h"
#include "protocol/frame_encode.h"
#include "tests/engine/fixture_paths.h"
#include "tests/support/tiny_tokenizer.h"

using namespace inkling;
namespace proto = inkling::protocol;

namespace {

struct Recorder : serve::FrameSink {
    std::vector<proto::Frame> frames;
    void send(const proto::Frame& f) override { frames.push_back(f); }

    template <class T>
    std::vector<T> all(const std::string& id) const {
        std::vector<T> out;
        for (const auto& f : frames)
            if (const T* t = std::get_if<T>(&f))
                if constexpr (requires { t->id; }) {
                    if (t->id == id) out.push_back(*t);
                }
        return out;
    }
    // Token ids a tokenizer-less model streamed for `id` ("<id> " per DATA frame).
    std::vector<std::int32_t> tokens(const std::string& id) const {
        std::vector<std::int32_t> out;
        for (const auto& d : all<proto::Data>(id)) out.push_back(std::stoi(d.bytes));
        return out;
    }
};

proto::Submit submit(const std::string& id, int slot, const std::vector<std::int32_t>& prompt, int max_tokens) {
    return serve::ids_request(id, slot, prompt, max_tokens);
}

struct Engine {
    model::Model model;
    cpu::ThreadPool pool{2};
    serve::Scheduler sched;
    Recorder out;
    Engine(const std::string& fixture, serve::ServeOptions o, const model::Tokenizer* tokenizer = nullptr)
        : model(model::load_model(test_paths::fixtures() / fixture)), sched(model, tokenizer, pool, o) {}
    void drain() {
        for (int i = 0; i < 100000 && sched.busy(); ++i) sched.run_round(out);
        REQUIRE(!sched.busy());
    }
    std::vector<std::int32_t> alone(const std::vector<std::int32_t>& prompt, int n) {
        Engine fresh(model.dir.filename().string(), {});
        fresh.sched.submit(submit("solo", 0, prompt, n), fresh.out);
        fresh.drain();
        return fresh.out.tokens("solo");
    }
};

std::vector<std::int32_t> golden_prompt(const std::string& name) {
    return test_paths::golden(name)["prompt_ids"].get<std::vector<std::int32_t>>();
}

}  // namespace

TEST_CASE("interleaved sessions give exactly the tokens each gives alone") {
    serve::ServeOptions o;
    o.slots = 4;
    o.prefill_chunk = 5;  // long prompts take several rounds, interleaved with decodes
    Engine e("mixed-hf-f32", o);
    auto p = golden_prompt("mixed-hf-f32");
    std::vector<std::vector<std::int32_t>> prompts{
        {p.begin(), p.begin() + 3}, {p.begin() + 2, p.begin() + 30}, {p.begin() + 7, p.begin() + 19}, {p.begin() + 1, p.end()}};
    for (int i = 0; i < 4; ++i) e.sched.submit(submit("s" + std::to_string(i), i, prompts[i], 10 + i), e.out);
    e.drain();
    for (int i = 0; i < 4; ++i) {
        CAPTURE(i);
        auto id = "s" + std::to_string(i);
        auto got = e.out.tokens(id);
        CHECK(!got.empty());
        CHECK(got == e.alone(prompts[i], 10 + i));
        auto done = e.out.all<proto::Done>(id);
        REQUIRE(done.size() == 1);
        CHECK(done[0].stat.emitted == got.size());
        CHECK(done[0].stat.prompt_tokens == prompts[i].size());
    }
}

TEST_CASE("greedy tokens through serve equal the reference goldens (eos is not streamed)") {
    for (const char* name : {"ring-hf-f32", "base-release-bf16"}) {
        CAPTURE(name);
        Engine e(name, {});
        auto g = test_paths::golden(name);
        e.sched.submit(submit("g", 0, g["prompt_ids"].get<std::vector<std::int32_t>>(), 32), e.out);
        e.drain();
        auto want = g["tokens"].get<std::vector<std::int32_t>>();
        if (!want.empty() && want.back() == e.model.config.eos) want.pop_back();
        CHECK(e.out.tokens("g") == want);
    }
}

TEST_CASE("audio through serve: frames fill the placeholders and the slot is tainted") {
    Engine e("audio-hf-f32", {});
    auto g = test_paths::golden("audio-hf-f32");
    auto s = submit("a", 0, g["prompt_ids"].get<std::vector<std::int32_t>>(), 32);
    std::ifstream in(test_paths::fixtures() / "audio-hf-f32" / "sample.dmel", std::ios::binary);
    s.extension.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    e.sched.submit(s, e.out);
    e.drain();
    auto want = g["tokens"].get<std::vector<std::int32_t>>();
    if (!want.empty() && want.back() == e.model.config.eos) want.pop_back();
    CHECK(e.out.tokens("a") == want);
    // The same ids again with the same audio: no reuse across audio.
    s.id = "b";
    e.sched.submit(s, e.out);
    e.drain();
    auto accepts = e.out.all<proto::Accept>("b");
    REQUIRE(accepts.size() == 1);
    CHECK(accepts[0].reused == 0u);
    CHECK(e.out.tokens("b") == want);
    // Frames that do not match the placeholders are refused before anything runs.
    s.id = "c";
    s.extension.resize(s.extension.size() - 80);
    e.sched.submit(s, e.out);
    auto err = e.out.all<proto::Error>("c");
    REQUIRE(err.size() == 1);
    CHECK(err[0].code == proto::ErrorCode::AudioMismatch);
}

TEST_CASE("a prompt extending the slot's record reuses it and matches a fresh run") {
    Engine e("base-hf-f32", {});
    auto p = golden_prompt("base-hf-f32");
    std::vector<std::int32_t> first(p.begin(), p.begin() + 12);
    e.sched.submit(submit("t1", 0, first, 6), e.out);
    e.drain();
    auto gen = e.out.tokens("t1");
    REQUIRE(gen.size() == 6);
    // The record holds the prompt and every generated token but the last.
    std::vector<std::int32_t> second = first;
    second.insert(second.end(), gen.begin(), gen.end() - 1);
    const auto record = second.size();
    second.insert(second.end(), p.begin() + 20, p.begin() + 27);
    e.sched.submit(submit("t2", 0, second, 8), e.out);
    e.drain();
    auto acc = e.out.all<proto::Accept>("t2");
    REQUIRE(acc.size() == 1);
    CHECK(acc[0].reused == record);
    CHECK(e.out.tokens("t2") == e.alone(second, 8));
    CHECK(e.out.all<proto::Done>("t2")[0].stat.extra[0] == std::pair<std::string, std::string>{"reused", std::to_string(record)});
    // A prompt that diverges is not reused, and still gives the fresh tokens.
    std::vector<std::int32_t> other(p.begin() + 3, p.begin() + 15);
    e.sched.submit(submit("t3", 0, other, 5), e.out);
    e.drain();
    CHECK(e.out.all<proto::Accept>("t3")[0].reused == 0u);
    CHECK(e.out.tokens("t3") == e.alone(other, 5));
}

TEST_CASE("a pinned snapshot is restored for prompts that extend it, and matches a fresh run") {
    Engine e("ring-hf-f32", {});  // sliding layers with a 4-row ring: the rings must be restored too
    auto p = golden_prompt("ring-hf-f32");
    std::vector<std::int32_t> shared(p.begin(), p.begin() + 14);
    auto pinned = submit("pin", 0, shared, 4);
    pinned.options.pin = true;
    e.sched.submit(pinned, e.out);
    e.drain();
    for (int q = 0; q < 2; ++q) {
        std::vector<std::int32_t> prompt = shared;
        prompt.insert(prompt.end(), p.begin() + 18 + 4 * q, p.begin() + 24 + 4 * q);
        std::string id = "q" + std::to_string(q);
        e.sched.submit(submit(id, 0, prompt, 6), e.out);
        e.drain();
        CAPTURE(id);
        CHECK(e.out.all<proto::Accept>(id)[0].reused == shared.size());
        CHECK(e.out.tokens(id) == e.alone(prompt, 6));
    }
    // reset=1 drops the slot and its snapshots.
    std::vector<std::int32_t> prompt = shared;
    prompt.push_back(p[30]);
    auto r = submit("r", 0, prompt, 3);
    r.options.reset = true;
    e.sched.submit(r, e.out);
    e.drain();
    CHECK(e.out.all<proto::Accept>("r")[0].reused == 0u);
}

TEST_CASE("CANCEL frees the slot at once; STOP ends through DONE") {
    Engine e("base-hf-f32", {});
    auto p = golden_prompt("base-hf-f32");
    e.sched.submit(submit("long", 0, p, 500), e.out);
    e.sched.run_round(e.out);
    e.sched.run_round(e.out);
    e.sched.cancel("long", e.out);
    auto err = e.out.all<proto::Error>("long");
    REQUIRE(err.size() == 1);
    CHECK(err[0].code == proto::ErrorCode::Cancelled);
    CHECK(e.out.all<proto::Done>("long").empty());
    e.sched.submit(submit("next", 0, p, 3), e.out);
    CHECK(e.out.all<proto::Accept>("next").size() == 1);
    e.sched.run_round(e.out);
    e.sched.stop("next", e.out);
    auto done = e.out.all<proto::Done>("next");
    REQUIRE(done.size() == 1);
    CHECK(!done[0].stat.length_limited);
    e.sched.stop("next", e.out);
    CHECK(e.out.all<proto::Error>("next")[0].code == proto::ErrorCode::NotFound);
}

TEST_CASE("limits are checked before anything runs") {
    serve::ServeOptions o;
    o.slots = 2;
    o.context = 20;
    Engine e("base-hf-f32", o);
    auto p = golden_prompt("base-hf-f32");
    auto code = [&](const proto::Submit& s) {
        e.sched.submit(s, e.out);
        auto errs = e.out.all<proto::Error>(s.id);
        return errs.empty() ? std::string("accepted") : std::string(proto::to_string(errs.back().code));
    };
    CHECK(code(submit("c1", 0, p, 4)) == "CONTEXT_EXCEEDED");  // 32 prompt tokens > 20
    CHECK(e.out.all<proto::Error>("c1")[0].detail == "prompt_tokens=32 requested=36 capacity=20");
    CHECK(code(submit("s9", 5, {1, 2}, 4)) == "BAD_REQUEST");
    auto bad = submit("b1", 0, {1, 2}, 4);
    bad.prompt = "1 2 x";
    CHECK(code(bad) == "BAD_REQUEST");
    bad.prompt = "1 999999";
    CHECK(code(bad) == "BAD_REQUEST");
    bad.prompt = "   ";
    CHECK(code(bad) == "EMPTY_PROMPT");
    auto text = submit("t1", 0, {1}, 4);
    text.options.ids = false;
    text.prompt = "hello";
    CHECK(code(text) == "NOT_SUPPORTED");  // no tokenizer.json in this fixture
    auto audio = submit("a1", 0, {1, 2}, 4);
    audio.extension.assign(80, '\1');
    CHECK(code(audio) == "NOT_SUPPORTED");  // no audio tower
    // Generation is clamped to the room left and reported as length-limited.
    const std::vector<std::int32_t> fit{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    CHECK(code(submit("fit", 0, fit, 100)) == "accepted");
    e.drain();
    auto done = e.out.all<proto::Done>("fit");
    REQUIRE(done.size() == 1);
    // 20 - 16 = 4 tokens of room: exactly the 4 a roomy engine gives first (no EOS among
    // them on this fixture), and the DONE says the length, not the model, ended it.
    const auto want = e.alone(fit, 4);
    REQUIRE(want.size() == 4u);
    CHECK(e.out.tokens("fit") == want);
    CHECK(done[0].stat.emitted == 4u);
    CHECK(done[0].stat.length_limited);
}

TEST_CASE("--fault-hold-after: a request holds after N tokens until STOP or CANCEL, the others go on") {
    serve::ServeOptions o;
    o.slots = 3;
    o.fault_hold_after = 3;
    Engine e("base-hf-f32", o);
    auto p = golden_prompt("base-hf-f32");
    e.sched.submit(submit("held", 0, p, 500), e.out);
    e.sched.submit(submit("short", 1, p, 3), e.out);  // no more than N: never held
    e.sched.submit(submit("gone", 2, p, 500), e.out);
    for (int i = 0; i < 200; ++i) e.sched.run_round(e.out);
    const auto want = e.alone(p, 3);
    REQUIRE(want.size() == 3u);
    CHECK(e.out.tokens("held") == want);
    CHECK(e.out.tokens("gone") == want);
    REQUIRE(e.out.all<proto::Done>("short").size() == 1);
    CHECK(e.out.tokens("short") == want);
    CHECK(e.out.all<proto::Done>("held").empty());
    CHECK(e.sched.busy());
    e.sched.cancel("gone", e.out);
    e.sched.stop("held", e.out);
    auto done = e.out.all<proto::Done>("held");
    REQUIRE(done.size() == 1);
    CHECK(done[0].stat.emitted == 3u);
    CHECK(!done[0].stat.length_limited);
    CHECK(e.out.all<proto::Error>("gone").at(0).code == proto::ErrorCode::Cancelled);
    CHECK(!e.sched.busy());
}

TEST_CASE("logprobs: ECHO for every prompt position, log-prob tails that are a distribution") {
    Engine e("dense-hf-f32", {});
    auto p = golden_prompt("dense-hf-f32");
    std::vector<std::int32_t> prompt(p.begin(), p.begin() + 9);
    auto s = submit("lp", 0, prompt, 3);
    s.options.logprobs = 5;
    e.sched.submit(s, e.out);
    e.drain();
    auto echo = e.out.all<proto::Echo>("lp");
    REQUIRE(echo.size() == prompt.size());
    CHECK(std::isnan(echo[0].logprobs.logprob));
    for (std::size_t i = 1; i < echo.size(); ++i) {
        CHECK(echo[i].pos == i);
        CHECK(echo[i].logprobs.top.size() == 5u);
        CHECK(echo[i].logprobs.logprob <= 0.0);
        CHECK(echo[i].logprobs.logprob <= echo[i].logprobs.top[0].second + 1e-9);
    }
    // ECHO's argmax at position i is the teacher-forced argmax of row i-1.
    auto golden_argmax = test_paths::golden("dense-hf-f32")["prompt_argmax"].get<std::vector<std::int32_t>>();
    for (std::size_t i = 1; i < echo.size(); ++i) CHECK(echo[i].logprobs.top[0].first == static_cast<std::uint32_t>(golden_argmax[i - 1]));
    for (const auto& d : e.out.all<proto::Data>("lp")) {
        REQUIRE(d.logprobs);
        CHECK(d.logprobs->logprob == doctest::Approx(d.logprobs->top[0].second));  // greedy: the top token
    }
    // max_tokens 0 with logprobs: a read-out only.
    auto score = submit("score", 1, prompt, 0);
    score.options.logprobs = 1;
    e.sched.submit(score, e.out);
    e.drain();
    CHECK(e.out.all<proto::Echo>("score").size() == prompt.size());
    CHECK(e.out.all<proto::Done>("score")[0].stat.emitted == 0u);
}

TEST_CASE("the same seed gives the same sampled tokens") {
    Engine e("base-hf-f32", {});
    auto p = golden_prompt("base-hf-f32");
    for (const char* id : {"x", "y"}) {
        auto s = submit(id, 0, p, 12);
        s.temperature = 1.0;
        s.options.seed = 1234;
        s.options.reset = true;
        e.sched.submit(s, e.out);
        e.drain();
    }
    CHECK(e.out.tokens("x") == e.out.tokens("y"));
    CHECK(e.out.tokens("x").size() == 12u);
}

TEST_CASE("an ids=1 token id past the unpadded vocabulary is BAD_REQUEST, and the engine serves on") {
    // base-hf-f32: 512 embedding rows, logits over 500. ECHO scores each prompt id under
    // the logits, so an id in 500..511 must be refused at SUBMIT, not read out of bounds.
    serve::ServeOptions o;
    o.slots = 1;
    Engine e("base-hf-f32", o);
    auto s = submit("pad", 0, {1, 2}, 1);
    s.prompt = "1 505";
    s.options.logprobs = 1;
    e.sched.submit(s, e.out);
    auto errs = e.out.all<proto::Error>("pad");
    REQUIRE(errs.size() == 1);
    CHECK(errs[0].code == proto::ErrorCode::BadRequest);
    CHECK(errs[0].detail == "ids=1: token id 505 is outside the vocabulary (0..499)");
    CHECK(e.out.all<proto::Accept>("pad").empty());
    CHECK(!e.sched.busy());
    e.sched.submit(submit("next", 0, {1, 2, 499}, 2), e.out);
    e.drain();
    CHECK(e.out.all<proto::Done>("next").size() == 1);
}

TEST_CASE("a token id the tokenizer cannot decode: in an ids=1 prompt BAD_REQUEST, sampled ERROR INTERNAL for that request alone") {
    // A tokenizer of the 256 byte tokens in front of a model whose logits cover 500 ids.
    const auto tok = model::Tokenizer::parse(test_support::tiny_tokenizer({}).dump(), "tiny tokenizer");
    serve::ServeOptions o;
    o.slots = 2;
    Engine e("base-hf-f32", o, &tok);
    auto s = submit("gap", 0, {1, 300}, 1);
    s.options.logprobs = 1;
    e.sched.submit(s, e.out);
    auto errs = e.out.all<proto::Error>("gap");
    REQUIRE(errs.size() == 1);
    CHECK(errs[0].code == proto::ErrorCode::BadRequest);
    CHECK(errs[0].detail == "ids=1: token id 300 is not in the tokenizer");

    // Find a prompt whose greedy continuation (without the tokenizer) reaches an id >= 256.
    Engine plain("base-hf-f32", {});
    std::vector<std::int32_t> prompt;
    std::size_t first_gap = 0;
    for (std::int32_t t = 1; t < 256 && prompt.empty(); ++t) {
        const std::string id = "probe" + std::to_string(t);
        auto probe = submit(id, 0, {t, 7, 11}, 8);
        probe.options.reset = true;
        plain.sched.submit(probe, plain.out);
        plain.drain();
        const auto tokens = plain.out.tokens(id);
        for (std::size_t i = 0; i < tokens.size(); ++i)
            if (tokens[i] >= 256) {
                prompt = {t, 7, 11};
                first_gap = i;
                break;
            }
    }
    REQUIRE(!prompt.empty());
    // It streams the tokens before that one, then ends with ERROR INTERNAL; a request in
    // the other slot in the same rounds is unaffected.
    e.sched.submit(submit("bad", 0, prompt, 8), e.out);
    e.sched.submit(submit("good", 1, {65, 66}, 1), e.out);
    e.drain();
    CHECK(e.out.all<proto::Data>("bad").size() == first_gap);
    auto internal = e.out.all<proto::Error>("bad");
    REQUIRE(internal.size() == 1);
    CHECK(internal[0].code == proto::ErrorCode::Internal);
    CHECK(internal[0].detail.find("is not in the tokenizer") != std::string::npos);
    CHECK(e.out.all<proto::Done>("bad").empty());
    // "good" either finished or hit the same gap; either way it ended explicitly.
    CHECK(e.out.all<proto::Done>("good").size() + e.out.all<proto::Error>("good").size() == 1);
    // The engine serves on: a prompt read-out decodes its ids.
    auto after = submit("after2", 0, {65, 66}, 0);
    after.options.logprobs = 1;
    e.sched.submit(after, e.out);
    e.drain();
    CHECK(e.out.all<proto::Done>("after2").size() == 1);
    CHECK(e.out.all<proto::Echo>("after2").size() == 2);
}

TEST_CASE("a DMel byte above 15 is AUDIO_MISMATCH naming it, never clamped") {
    Engine e("audio-hf-f32", {});
    const std::int32_t audio = e.model.config.audio_token;
    auto s = submit("loud", 0, {1, audio, audio, 2}, 1);
    s.extension.assign(160, '\x0f');
    s.extension[97] = '\x10';
    e.sched.submit(s, e.out);
    auto errs = e.out.all<proto::Error>("loud");
    REQUIRE(errs.size() == 1);
    CHECK(errs[0].code == proto::ErrorCode::AudioMismatch);
    CHECK(errs[0].detail == "DMel byte 16 at offset 97 is not a level (0..15)");
    s.id = "ok";
    s.extension[97] = '\x0f';
    e.sched.submit(s, e.out);
    CHECK(e.out.all<proto::Accept>("ok").size() == 1);
    e.drain();
}

TEST_CASE("a snapshot pinned from an audio-tainted state is never restored into a text request") {
    Engine e("audio-hf-f32", {});
    const std::int32_t audio = e.model.config.audio_token;
    const std::vector<std::int32_t> pinned_ids{1, audio, audio, 2, 3};
    // A: audio frames fill the placeholders, and the state is pinned after the prefill.
    auto a = submit("a", 0, pinned_ids, 1);
    a.extension.assign(160, '\x07');
    a.options.pin = true;
    e.sched.submit(a, e.out);
    e.drain();
    // B: the same ids as text (placeholders without frames) and a tail; the slot is tainted,
    // so B starts afresh, and its record now begins with the pinned ids.
    auto b_ids = pinned_ids;
    b_ids.insert(b_ids.end(), {7, 8});
    e.sched.submit(submit("b", 0, b_ids, 1), e.out);
    e.drain();
    REQUIRE(e.out.all<proto::Accept>("b").size() == 1);
    CHECK(e.out.all<proto::Accept>("b")[0].reused == 0u);
    // C: the pinned ids and another tail. The slot's record is no prefix of it, the pin is:
    // restoring it would give C the conv and ring state that A's audio left.
    auto c_ids = pinned_ids;
    c_ids.push_back(9);
    e.sched.submit(submit("c", 0, c_ids, 3), e.out);
    e.drain();
    auto accept = e.out.all<proto::Accept>("c");
    REQUIRE(accept.size() == 1);
    CHECK(accept[0].reused == 0u);
    CHECK(e.out.tokens("c") == e.alone(c_ids, 3));
}
