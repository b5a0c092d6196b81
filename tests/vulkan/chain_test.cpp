// The dense chain on a real Vulkan driver (lavapipe in CI) against the CPU forward:
// token-exact greedy continuations and logits within 1e-4 on geometries that exercise
// every layer kind, a lost device at frames spanning prefill and decode, partial chains,
// a budget too small for the step, state written by the host between chain steps
// (CPU decode steps, a reset, a snapshot restore), and interleaved sessions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/model/weights.h"
#include "engine/sampling/sampler.h"
#include "engine/vulkan/chain.h"
#include "engine/vulkan/frame.h"
#include "tests/engine/fixture_paths.h"
#include "tests/vulkan/chain_harness.h"

using namespace inkling;

using namespace chain_harness;

namespace {

// The device bytes of `model`'s weights under `o` (a chain made and dropped); 0 without a device.
std::uint64_t weights_on_device(const model::Model& model, const vulkan::ChainOptions& o) {
    auto probe = chain_or_skip(model, o);
    return probe ? probe->memory_used() : 0;
}

// `ids` through both forwards in steps of `chunk`, then `decode` greedy steps with the CPU's
// token: every step's logits within 1e-4 and the tokens equal. `x`, `y`: the last logits.
void lockstep(forward::Forward& cpu_fw, forward::Forward& dev_fw, forward::SessionState& a, forward::SessionState& b,
              std::span<const std::int32_t> ids, std::size_t chunk, int decode, std::vector<float>& x,
              std::vector<float>& y) {
    for (std::size_t at = 0; at < ids.size(); at += chunk) {
        const auto part = ids.subspan(at, std::min(chunk, ids.size() - at));
        x = cpu_fw.step(a, part, nullptr, false);
        y = dev_fw.step(b, part, nullptr, false);
        CHECK(max_diff(x, y) <= 1e-4);
    }
    for (int i = 0; i < decode; ++i) {
        const auto t = static_cast<std::int32_t>(sampling::argmax(x));
        CHECK(t == static_cast<std::int32_t>(sampling::argmax(y)));
        x = cpu_fw.step(a, std::span(&t, 1), nullptr, false);
        y = dev_fw.step(b, std::span(&t, 1), nullptr, false);
        CHECK(max_diff(x, y) <= 1e-4);
    }
}

}  // namespace

TEST_CASE("vulkan chain: token-exact with the CPU on every geometry") {
    // base: tau, 2 shared experts, dense then MoE; ring: window 4 < prompt, 1 shared,
    // MQA global; dense: dense only, no tau; mixed: E=16 top-4, layer_types; audio: ns=1.
    for (const char* name : {"base-hf-f32", "base-release-bf16", "ring-hf-f32", "dense-release-bf16", "mixed-hf-f32",
                             "audio-hf-f32"}) {
        CAPTURE(name);
        auto model = model::load_model(test_paths::fixtures() / name);
        cpu::ThreadPool pool(2);
        forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
        // The routed experts on the host (the resident mode has its own cases).
        vulkan::ChainOptions o;
        o.expert_layers = 0;
        auto chain = chain_or_skip(model, o);
        if (!chain) return;
        CHECK(chain->full());
        dev_fw.set_chain(std::move(chain));
        const auto prompt = prompt_for(model.config, 19);
        check_same(greedy(cpu_fw, model.config, prompt, 12), greedy(dev_fw, model.config, prompt, 12));
        // Chunked prefill (a chunk that wraps the ring inside itself, on `ring`).
        check_same(greedy(cpu_fw, model.config, prompt, 4, 7), greedy(dev_fw, model.config, prompt, 4, 7));
        REQUIRE(dev_fw.chain() != nullptr);
        CHECK(dev_fw.take_device_event().empty());
        // The device ran every step (13, then 3 prompt chunks and 4 tokens), all layers.
        const auto& st = dev_fw.chain()->stats();
        CHECK(st.steps == 13 + 7);
        CHECK(st.frames >= st.steps);
        CHECK((st.host_pairs > 0) == (sparse_layers(model.config) > 0));  // routed experts on the host
    }
}

TEST_CASE("vulkan chain: a lost device mid-prefill or mid-decode finishes on the CPU with the same tokens") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(model.config, 17);
    const Trace want = greedy(cpu_fw, model.config, prompt, 10, 6);
    // Frames: 5 layers, 3 of them MoE (A1 + A2 each) + the last frame ≈ 9 a step; the
    // prompt takes 3 steps. Losses at frames 1, 4, 13 (prefill) and 30, 60 (decode).
    vulkan::ChainOptions o;
    o.expert_layers = 0;  // the frame count above: routed experts on the host
    lost_device_runs(model, pool, o, prompt, 10, 6, want, {1, 4, 13, 30, 60});
}

TEST_CASE("vulkan chain: a partial chain (forced, and from a small budget) matches the CPU") {
    auto model = model::load_model(test_paths::fixtures() / "base-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(model.config, 15);
    const Trace want = greedy(cpu_fw, model.config, prompt, 8);
    for (int layers : {1, 3, 5}) {
        CAPTURE(layers);
        vulkan::ChainOptions o;
        o.layers = layers;
        auto chain = chain_or_skip(model, o);
        if (!chain) return;
        CHECK(chain->layers() == layers);
        CHECK(!chain->full());
        forward::Forward dev_fw(model, pool);
        dev_fw.set_chain(std::move(chain));
        check_same(want, greedy(dev_fw, model.config, prompt, 8));
        CHECK(dev_fw.chain()->stats().steps == 1 + 8);  // the first layers of every step
    }
    // A budget that holds a few layers' weights but not all of them.
    std::uint64_t per_layer = 0;
    for (const auto& m : {model.weights.layers[3].wq, model.weights.layers[3].wk, model.weights.layers[3].wv,
                          model.weights.layers[3].wr, model.weights.layers[3].wo, model.weights.layers[3].router})
        per_layer += m.bytes();
    for (const auto& s : model.weights.layers[3].shared) per_layer += s.gate.bytes() + s.up.bytes() + s.down.bytes();
    vulkan::ChainOptions o;
    o.budget = per_layer * 8;  // a quarter of it is kept back for scratch
    o.expert_layers = 0;       // the dense layers alone against the budget
    auto chain = chain_or_skip(model, o);
    if (!chain) return;
    CHECK(chain->layers() >= 1);
    CHECK(chain->layers() < model.config.layers);
    forward::Forward dev_fw(model, pool);
    dev_fw.set_chain(std::move(chain));
    // The scratch of a long step may not fit next to the weights: those steps run on the
    // CPU, the others on the device — the tokens don't change.
    check_same(want, greedy(dev_fw, model.config, prompt, 8));
    CHECK(dev_fw.chain()->stats().steps >= 8);  // the decode steps fit
    CHECK(dev_fw.chain()->stats().steps <= 1 + 8);
}

TEST_CASE("vulkan chain: every layer fits but lm_head beside them does not: the last layer stays on the host") {
    // The Inkling-Small-width bench model on lavapipe's 2 GiB: its six layers fit (1.6 GiB),
    // its lm_head (1.5 GiB) not beside them. A chain of every layer computes the logits, so it
    // needed lm_head after all and the engine failed at start ("budget exceeded").
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    const auto& c = model.config;
    std::uint64_t layers = 0;
    for (const auto& L : model.weights.layers) {
        for (const auto* m : {&L.wq, &L.wk, &L.wv, &L.wr, &L.wo, &L.router, &L.dense.gate, &L.dense.up, &L.dense.down})
            if (m->data) layers += m->bytes();
        for (const auto& s : L.shared) layers += s.gate.bytes() + s.up.bytes() + s.down.bytes();
    }
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(c, 11);
    const Trace want = greedy(cpu_fw, c, prompt, 6);
    vulkan::ChainOptions o;
    o.budget = layers * 4 / 3 + 4096;  // a quarter is kept back: the layers fit what is left
    REQUIRE(o.budget * 3 / 4 < layers + model.weights.lm_head.bytes());  // ... and lm_head not beside them
    o.expert_layers = 0;
    auto chain = chain_or_skip(model, o);
    if (!chain) return;
    CHECK(chain->layers() == c.layers - 1);
    CHECK(!chain->full());
    forward::Forward dev_fw(model, pool);
    dev_fw.set_chain(std::move(chain));
    check_same(want, greedy(dev_fw, c, prompt, 6));
}

TEST_CASE("vulkan chain: a prompt step too big for the budget runs on the CPU and leaves the budget to later steps") {
    // A 400-row step's scratch (~3 MiB here) does not fit next to the weights; 30-row steps
    // and decode rows do. The refused step used to keep the buffers it had got, which filled
    // the budget, and every later step then failed too (seen: Inkling-Small's width with a
    // tier on the H200, all 34 steps on the CPU).
    auto model = model::load_model(test_paths::fixtures() / "base-hf-f32");
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    vulkan::ChainOptions o;
    o.expert_layers = 0;
    const std::uint64_t weights = weights_on_device(model, o);
    if (weights == 0) return;
    o.budget = weights + (768u << 10);
    auto chain = chain_or_skip(model, o);
    REQUIRE(chain);
    forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
    dev_fw.set_chain(std::move(chain));
    auto a = forward::make_session(c, 1024), b = forward::make_session(c, 1024);
    const auto prompt = prompt_for(c, 580);
    std::vector<float> x, y;
    lockstep(cpu_fw, dev_fw, a, b, std::span(prompt).first(400), 400, 0, x, y);
    REQUIRE(dev_fw.chain() != nullptr);
    CHECK(dev_fw.chain()->stats().steps == 0);  // left to the CPU
    lockstep(cpu_fw, dev_fw, a, b, std::span(prompt).subspan(400), 30, 4, x, y);
    CHECK(dev_fw.chain()->stats().steps == 6 + 4);  // every later step on the device
}

TEST_CASE("vulkan chain: host writes between chain steps are uploaded (CPU decode, reset, snapshot restore)") {
    auto model = model::load_model(test_paths::fixtures() / "ring-hf-f32");
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
    auto chain = chain_or_skip(model);
    if (!chain) return;
    dev_fw.set_chain(std::move(chain), /*prompts_only=*/true);  // decode steps on the CPU
    auto a = forward::make_session(c, 64), b = forward::make_session(c, 64);
    const auto p1 = prompt_for(c, 9), p2 = prompt_for(c, 5);
    auto step = [&](std::span<const std::int32_t> ids) {
        auto x = cpu_fw.step(a, ids, nullptr, false);
        auto y = dev_fw.step(b, ids, nullptr, false);
        CHECK(max_diff(x, y) <= 1e-4);
        return static_cast<std::int32_t>(sampling::argmax(x));
    };
    std::int32_t t = step(p1);  // device
    for (int i = 0; i < 6; ++i) t = step(std::span(&t, 1));  // CPU: the ring wraps on the host
    step(p2);  // device: must upload what the CPU wrote
    // A snapshot taken now, more steps, then the snapshot restored (the host's copy).
    const forward::SessionState snap_a = a, snap_b = b;
    step(p1);
    a = snap_a;
    b = snap_b;
    b.device_token = 0;  // what a restore does (serve/pin_pool.cpp)
    step(p2);
    a.reset();
    b.reset();
    step(p1);
}

TEST_CASE("vulkan chain: sessions interleaved in one batch match solo CPU runs") {
    auto model = model::load_model(test_paths::fixtures() / "base-release-bf16");
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
    auto chain = chain_or_skip(model);
    if (!chain) return;
    dev_fw.set_chain(std::move(chain));
    auto s1 = forward::make_session(c, 64), s2 = forward::make_session(c, 64);
    auto c1 = forward::make_session(c, 64), c2 = forward::make_session(c, 64);
    const auto p1 = prompt_for(c, 11), p2 = prompt_for(c, 4);
    std::vector<forward::Block> blocks = {{&s1, p1, nullptr, false}, {&s2, p2, nullptr, false}};
    auto got = dev_fw.step_batch(blocks);
    CHECK(max_diff(got[0], cpu_fw.step(c1, p1, nullptr, false)) <= 1e-4);
    CHECK(max_diff(got[1], cpu_fw.step(c2, p2, nullptr, false)) <= 1e-4);
    for (int i = 0; i < 5; ++i) {
        const auto t1 = static_cast<std::int32_t>(sampling::argmax(got[0]));
        const auto t2 = static_cast<std::int32_t>(sampling::argmax(got[1]));
        std::vector<forward::Block> next = {{&s2, std::span(&t2, 1), nullptr, false},
                                            {&s1, std::span(&t1, 1), nullptr, false}};
        auto r = dev_fw.step_batch(next);
        got = {r[1], r[0]};
        CHECK(max_diff(got[0], cpu_fw.step(c1, std::span(&t1, 1), nullptr, false)) <= 1e-4);
        CHECK(max_diff(got[1], cpu_fw.step(c2, std::span(&t2, 1), nullptr, false)) <= 1e-4);
    }
}

TEST_CASE("vulkan chain: the KV split (a global layer's older positions on the host) matches the CPU") {
    // mixed: global layers 1 and 4, tau from position 2, E=16; base: global layer 5.
    for (const char* name : {"mixed-hf-f32", "base-release-bf16"}) {
        CAPTURE(name);
        auto model = model::load_model(test_paths::fixtures() / name);
        cpu::ThreadPool pool(2);
        forward::Forward cpu_fw(model, pool);
        const auto prompt = prompt_for(model.config, 21);
        const Trace want = greedy(cpu_fw, model.config, prompt, 10, 5);
        for (std::int64_t window : {1, 4, 8}) {
            CAPTURE(window);
            vulkan::ChainOptions o;
            o.kv_window = window;
            auto chain = chain_or_skip(model, o);
            if (!chain) return;
            forward::Forward dev_fw(model, pool);
            dev_fw.set_chain(std::move(chain));
            check_same(want, greedy(dev_fw, model.config, prompt, 10, 5));
            CHECK(dev_fw.chain()->stats().split_layers > 0);
            CHECK(dev_fw.chain()->stats().steps == 5 + 10);  // on the device, split
        }
    }
    // Long enough chunks that the host's share runs on the thread pool.
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
    vulkan::ChainOptions o;
    o.kv_window = 8;
    auto chain = chain_or_skip(model, o);
    if (!chain) return;
    dev_fw.set_chain(std::move(chain));
    const auto prompt = prompt_for(model.config, 150);
    check_same(greedy(cpu_fw, model.config, prompt, 6, 50), greedy(dev_fw, model.config, prompt, 6, 50));
}

TEST_CASE("vulkan chain: a session too long for the budget splits its global layers by itself") {
    auto model = model::load_model(test_paths::fixtures() / "base-hf-f32");
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    vulkan::ChainOptions o;
    o.expert_layers = 0;  // the dense weights and the mirrors against the budget
    const std::uint64_t weights = weights_on_device(model, o);
    if (weights == 0) return;
    // A 4096-position session's global-layer mirror is 1 MiB (2 kv heads × 16 dims × 2 ×
    // 4 bytes a position): give the device room for the weights, the scratch and less.
    o.budget = weights + (768u << 10);
    auto chain = chain_or_skip(model, o);
    REQUIRE(chain);
    REQUIRE(chain->full());
    forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
    dev_fw.set_chain(std::move(chain));
    auto a = forward::make_session(c, 4096), b = forward::make_session(c, 4096);
    const auto prompt = prompt_for(c, 300);
    std::vector<float> x, y;
    lockstep(cpu_fw, dev_fw, a, b, prompt, 30, 6, x, y);  // steps whose scratch fits
    REQUIRE(dev_fw.chain() != nullptr);
    CHECK(dev_fw.chain()->stats().split_layers > 0);
    CHECK(dev_fw.chain()->stats().steps >= 16);  // the device ran them, split
}
