// The chain's resident mode on a real Vulkan driver (lavapipe in CI): every routed expert
// of a MoE layer on the device, the router's top-k and the combine there too, so a step
// needs one wait — against the CPU forward (tokens, logits within 1e-4, the same experts
// counted), with some layers resident and the rest on the host, with several sessions in
// one batch, and with a device lost mid-step; the expert tier (a few slots a layer, the
// misses on the host or streamed to the device), with a device lost there too.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/vulkan/chain.h"
#include "engine/vulkan/frame.h"
#include "engine/vulkan/ops.h"
#include "tests/engine/fixture_paths.h"
#include "tests/vulkan/chain_harness.h"

using namespace inkling;
using namespace chain_harness;

TEST_CASE("vulkan resident experts: routing on the device matches the CPU, one wait a step") {
    // base: 2 shared experts, tau; ring: window 4, 1 shared; mixed: E=16 top-4; audio: ns=1.
    // submit_dispatches 0: one submit a step; 24: a step's frames submitted as they fill
    // (every fixture's step records more than that), still one wait.
    for (const std::uint32_t submit : {0u, 24u})
        for (const char* name : {"base-hf-f32", "base-release-bf16", "ring-hf-f32", "mixed-hf-f32", "audio-hf-f32"}) {
            CAPTURE(name);
            CAPTURE(submit);
            auto model = model::load_model(test_paths::fixtures() / name);
            cpu::ThreadPool pool(2);
            forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
            vulkan::ChainOptions o;
            o.submit_dispatches = submit;
            auto chain = chain_or_skip(model, o);
            if (!chain) return;
            REQUIRE(chain->full());
            CHECK(chain->resident_layers() == sparse_layers(model.config));
            CHECK(chain->expert_bytes() > 0);
            dev_fw.set_chain(std::move(chain));
            const auto prompt = prompt_for(model.config, 19);
            const int decode = 12;
            check_same(greedy(cpu_fw, model.config, prompt, decode), greedy(dev_fw, model.config, prompt, decode));
            REQUIRE(dev_fw.chain() != nullptr);
            const auto& st = dev_fw.chain()->stats();
            // Every step ran on the device with one wait (no layer splits).
            CHECK(st.steps == static_cast<std::uint64_t>(1 + decode));
            CHECK(st.waits == st.steps);
            if (submit == 0) {
                CHECK(st.frames == st.steps);
            } else {
                // A new frame after each `submit` dispatches, at most 4 a step (the ring).
                CHECK(st.frames > st.steps);
                CHECK(st.frames <= std::min(st.steps + st.dispatches / submit, 4 * st.steps));
            }
            CHECK(st.host_pairs == 0);
            CHECK(st.device_pairs ==
                  static_cast<std::uint64_t>((19 + decode) * model.config.top_k * sparse_layers(model.config)));
            // The device's routes reach the usage counts: the same experts as the CPU picked.
            CHECK(dev_fw.expert_uses() == cpu_fw.expert_uses());
        }
}

TEST_CASE("vulkan resident experts: decode past 300 positions takes the split attention, the CPU's tokens") {
    // Decode rows at positions 300..315: few (row, head) pairs over many positions, so each
    // layer's attention splits its positions over several workgroups and merges them
    // (Ops::attn_split).
    for (const char* name : {"base-hf-f32", "ring-hf-f32", "mixed-release-bf16"}) {
        CAPTURE(name);
        auto model = model::load_model(test_paths::fixtures() / name);
        cpu::ThreadPool pool(2);
        forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
        vulkan::ChainOptions o;
        o.profile = true;  // the kernels the steps ran, by name
        auto chain = chain_or_skip(model, o);
        if (!chain) return;
        dev_fw.set_chain(std::move(chain));
        const auto prompt = prompt_for(model.config, 300);
        vulkan::AttnPush decode{};
        decode.rows = 1, decode.pos0 = 300, decode.H = static_cast<std::uint32_t>(model.config.heads);
        decode.hd = static_cast<std::uint32_t>(model.config.head_dim);
        REQUIRE(vulkan::Ops::attn_split(decode).chunks >= 2);  // the rule splits these rows
        check_same(greedy(cpu_fw, model.config, prompt, 16), greedy(dev_fw, model.config, prompt, 16));
        REQUIRE(dev_fw.chain() != nullptr);
        CHECK(dev_fw.chain()->stats().steps == 17);
        const auto* prof = dev_fw.chain()->profile();
        if (!prof) continue;  // a device without timestamps
        CHECK(prof->ns_and_count.count("relattn_split") == 1);
        CHECK(prof->ns_and_count.count("relattn_merge") == 1);
    }
}

TEST_CASE("vulkan resident experts: prompts through the tiled gemm (--vk-gemm-rows) give the CPU's tokens") {
    for (const char* name : {"base-release-bf16", "mixed-hf-f32"}) {
        CAPTURE(name);
        auto model = model::load_model(test_paths::fixtures() / name);
        cpu::ThreadPool pool(2);
        forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
        vulkan::ChainOptions o;
        o.gemm_rows = 8;  // the 19-row prompt and the 7-row chunks; decode rows stay on gemv
        o.profile = true;
        auto chain = chain_or_skip(model, o);
        if (!chain) return;
        dev_fw.set_chain(std::move(chain));
        const auto prompt = prompt_for(model.config, 19);
        check_same(greedy(cpu_fw, model.config, prompt, 6), greedy(dev_fw, model.config, prompt, 6));
        REQUIRE(dev_fw.chain() != nullptr);
        if (const auto* prof = dev_fw.chain()->profile()) CHECK(prof->ns_and_count.count("gemm") == 1);
    }
}

TEST_CASE("vulkan resident experts: some layers resident, the others routed on the host") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(model.config, 17);
    const Trace want = greedy(cpu_fw, model.config, prompt, 8, 5);
    const int sparse = sparse_layers(model.config);
    REQUIRE(sparse >= 2);
    for (int layers : {1, sparse - 1}) {
        CAPTURE(layers);
        vulkan::ChainOptions o;
        o.expert_layers = layers;
        auto chain = chain_or_skip(model, o);
        if (!chain) return;
        CHECK(chain->resident_layers() == layers);
        forward::Forward dev_fw(model, pool);
        dev_fw.set_chain(std::move(chain));
        check_same(want, greedy(dev_fw, model.config, prompt, 8, 5));
        const auto& st = dev_fw.chain()->stats();
        CHECK(st.device_pairs > 0);
        CHECK(st.host_pairs > 0);
        CHECK(st.waits > st.steps);  // the host-routed layers wait for their router logits
        CHECK(dev_fw.expert_uses() == cpu_fw.expert_uses());
    }
}

TEST_CASE("vulkan resident experts: sessions batched together match solo CPU runs") {
    auto model = model::load_model(test_paths::fixtures() / "base-release-bf16");
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
    auto chain = chain_or_skip(model);
    if (!chain) return;
    REQUIRE(chain->resident_layers() > 0);
    dev_fw.set_chain(std::move(chain));
    auto s1 = forward::make_session(c, 64), s2 = forward::make_session(c, 64), s3 = forward::make_session(c, 64);
    auto c1 = forward::make_session(c, 64), c2 = forward::make_session(c, 64), c3 = forward::make_session(c, 64);
    const auto p1 = prompt_for(c, 9), p2 = prompt_for(c, 3), p3 = prompt_for(c, 14);
    std::vector<forward::Block> blocks = {{&s1, p1, nullptr, false}, {&s2, p2, nullptr, false}, {&s3, p3, nullptr, true}};
    auto got = dev_fw.step_batch(blocks);
    CHECK(max_diff(got[0], cpu_fw.step(c1, p1, nullptr, false)) <= 1e-4);
    CHECK(max_diff(got[1], cpu_fw.step(c2, p2, nullptr, false)) <= 1e-4);
    CHECK(max_diff(got[2], cpu_fw.step(c3, p3, nullptr, true)) <= 1e-4);
    CHECK(dev_fw.chain()->stats().waits == 1);
}

TEST_CASE("vulkan resident experts: a device lost mid-step finishes on the CPU with the same tokens") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(model.config, 17);
    const Trace want = greedy(cpu_fw, model.config, prompt, 10, 6);
    {
        auto probe = chain_or_skip(model);
        if (!probe) return;
        REQUIRE(probe->resident_layers() > 0);
    }
    // One submit a step: the prompt takes submits 1–3, decode the rest.
    lost_device_runs(model, pool, {}, prompt, 10, 6, want, {1, 2, 3, 4, 9});
}

TEST_CASE("vulkan expert tier: a few slots a layer, hits on the device and misses on the host, same tokens") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");  // E=16, top-4
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(c, 17);
    const Trace want = greedy(cpu_fw, c, prompt, 14, 5);
    for (bool inline_uploads : {false, true}) {
        for (int slots : {1, 5}) {
            CAPTURE(inline_uploads);
            CAPTURE(slots);
            vulkan::ChainOptions o;
            o.expert_slots = slots;
            o.inline_uploads = inline_uploads;
            auto chain = chain_or_skip(model, o);
            if (!chain) return;
            REQUIRE(chain->tier_layers() == sparse_layers(c));
            CHECK(chain->resident_layers() == 0);
            forward::Forward dev_fw(model, pool);
            dev_fw.set_chain(std::move(chain));
            check_same(want, greedy(dev_fw, c, prompt, 14, 5));
            vulkan::Chain& ch = *dev_fw.chain();
            const auto& st = ch.stats();
            CHECK(st.steps == 4 + 14);
            CHECK(st.host_pairs > 0);    // the first step: nothing in the slots yet
            CHECK(st.device_pairs > 0);  // later steps: the hot experts are there
            CHECK(st.host_pairs + st.device_pairs ==
                  static_cast<std::uint64_t>((17 + 14) * c.top_k * sparse_layers(c)));
            CHECK(ch.tier()->counters().uploads > 0);
            if (slots == 1) CHECK(ch.tier()->counters().evictions > 0);
            // Once the uploads land, the slots hold the experts the usage history ranks hottest.
            for (int round = 0; round < 3; ++round) {
                ch.tier()->drain();
                ch.tier()->between_steps();  // no frame in flight between steps
            }
            for (int i = 0; i < c.layers; ++i) {
                if (!c.kinds[i].sparse) continue;
                CAPTURE(i);
                const auto hot = ch.tier()->hottest(i);
                const auto in = ch.tier()->experts_in_slots(i);
                CHECK(!hot.empty());
                CHECK(in.size() <= static_cast<std::size_t>(slots));
                for (int e : hot) CHECK(std::find(in.begin(), in.end(), e) != in.end());
            }
        }
    }
}

TEST_CASE("vulkan expert tier: a device lost with experts in the slots finishes on the CPU") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(model.config, 17);
    const Trace want = greedy(cpu_fw, model.config, prompt, 10, 6);
    vulkan::ChainOptions o;
    o.expert_slots = 3;
    o.inline_uploads = true;  // uploads between steps on this thread: the same slots at the same submits every run
    lost_device_runs(model, pool, o, prompt, 10, 6, want, {2, 12, 30});
}

TEST_CASE("vulkan expert tier: a device lost during an expert upload finishes on the CPU") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(model.config, 17);
    const Trace want = greedy(cpu_fw, model.config, prompt, 10, 6);
    // Inline uploads: the failing one runs at a known step (on the worker thread it is seen
    // at the first step after it ran, which a test could only wait for by timing).
    {
        vulkan::ChainOptions o;
        o.expert_slots = 3;
        o.inline_uploads = true;
        o.fault_upload_at = 2;  // the second expert the tier uploads (after the first step)
        auto chain = chain_or_skip(model, o);
        if (!chain) return;
        forward::Forward dev_fw(model, pool);
        dev_fw.set_chain(std::move(chain));
        check_same(want, greedy(dev_fw, model.config, prompt, 10, 6));
        CHECK(dev_fw.chain() == nullptr);
        CHECK(dev_fw.take_device_event().find("expert upload") != std::string::npos);
    }
}

TEST_CASE("vulkan expert tier: a prompt chunk's cold experts streamed to the device, same tokens") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");  // E=16, top-4
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(c, 23);
    const Trace want = greedy(cpu_fw, c, prompt, 8);  // the prompt in one step: ~6 rows an expert
    const auto total = static_cast<std::uint64_t>((23 + 8) * c.top_k * sparse_layers(c));
    // The same tier without streaming: its uploads, to compare (streaming leaves the slots alone).
    vulkan::ChainOptions base;
    base.expert_slots = 1;
    base.inline_uploads = true;  // the slots change at the same steps every run
    base.stream_rows = 0;
    std::uint64_t uploads_without = 0, host_without = 0;
    {
        auto chain = chain_or_skip(model, base);
        if (!chain) return;
        forward::Forward dev_fw(model, pool);
        dev_fw.set_chain(std::move(chain));
        check_same(want, greedy(dev_fw, c, prompt, 8));
        const auto& st = dev_fw.chain()->stats();
        CHECK(st.stream_pairs == 0);
        CHECK(dev_fw.chain()->tier()->stream_batch() == 0);
        uploads_without = dev_fw.chain()->tier()->counters().uploads;
        host_without = st.host_pairs;
        CHECK(host_without > 0);
    }
    // stream_rows 1: every miss streams (decode's too), so the host computes no routed pair;
    // 3: the prompt's experts of 3 rows or more stream, the others and decode's stay on the
    // host. Slots 1 (one half, a batch of one), 2 (two halves of one: batches double
    // buffered) and 5 (two halves of two).
    for (std::uint32_t rows : {1u, 3u})
        for (int slots : {1, 2, 5}) {
            CAPTURE(rows);
            CAPTURE(slots);
            vulkan::ChainOptions o = base;
            o.stream_rows = rows;
            o.stream_slots = slots;
            auto chain = chain_or_skip(model, o);
            if (!chain) return;
            REQUIRE(chain->tier()->stream_batch() == static_cast<std::uint32_t>(slots >= 2 ? slots / 2 : 1));
            CHECK(chain->tier()->stream_halves() == (slots >= 2 ? 2 : 1));
            forward::Forward dev_fw(model, pool);
            dev_fw.set_chain(std::move(chain));
            check_same(want, greedy(dev_fw, c, prompt, 8));
            vulkan::Chain& ch = *dev_fw.chain();
            const auto& st = ch.stats();
            CHECK(st.steps == 1 + 8);
            CHECK(st.host_pairs + st.device_pairs == total);
            CHECK(st.stream_pairs > 0);
            CHECK(st.stream_pairs <= st.device_pairs);
            CHECK(st.host_pairs < host_without);
            if (rows == 1) CHECK(st.host_pairs == 0);
            if (rows == 3) CHECK(st.host_pairs > 0);  // decode's misses: one row each
            const auto tc = ch.tier()->counters();
            CHECK(tc.streamed > 0);
            CHECK(tc.stream_bytes > 0);
            CHECK(tc.uploads == uploads_without);  // the slots filled as without streaming
        }
}

TEST_CASE("vulkan expert tier: a device lost while experts stream finishes on the CPU") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool);
    const auto prompt = prompt_for(model.config, 17);
    const Trace want = greedy(cpu_fw, model.config, prompt, 6);
    vulkan::ChainOptions o;
    o.expert_slots = 1;
    o.inline_uploads = true;
    o.stream_rows = 1;  // every miss streams: most submits of a step are streamed batches
    o.stream_slots = 2;
    lost_device_runs(model, pool, o, prompt, 6, 1000, want, {2, 3, 5, 14});
}
