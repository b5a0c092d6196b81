// A converted model's int8 and int4 routed experts on the device (lavapipe in CI), the
// fixtures converted here with the converter `inkling convert --experts int8|int4` runs:
// resident (every expert in a slot, routing on the device) and as a tier forced small so
// eviction runs, each giving the CPU's greedy tokens; the tier's bytes are the quantized
// ones (more experts in the same budget); a device lost mid-step finishes on the CPU.
#include <doctest/doctest.h>

#include <map>
#include <vector>
#include <memory>
#include <string>

#include "engine/convert/convert.h"
#include "engine/experts/expert_cache.h"
#include "engine/forward/forward.h"
#include "engine/vulkan/chain.h"
#include "tests/engine/fixture_paths.h"
#include "tests/support/scratch_dir.h"
#include "tests/vulkan/chain_harness.h"
#include "tests/vulkan/ops_harness.h"

namespace fs = std::filesystem;
using namespace inkling;
using namespace chain_harness;

namespace {

// The logits' bound device vs CPU (docs/vulkan.md, "Quantized experts"): the chain's usual
// one. The integer products are the CPU's bits for the same activations (int_experts_ops_test);
// the activations differ by the dense layers' and SwiGLU's last bits, which could move an
// int8 activation by one step (seen: max |Δlogit| 1.4e-5 here, as with f32 experts).
constexpr double kBound = 1e-4;

// Converted copies of the fixtures, made once per run, removed at its end.
fs::path converted(const std::string& fixture, experts::Format format) {
    static test_support::ScratchDir root("vk-int-experts");
    static std::map<std::string, fs::path> done;
    const std::string name = fixture + "-" + experts::format_name(format);
    if (auto it = done.find(name); it != done.end()) return it->second;
    convert::Options o;
    o.src = test_paths::fixtures() / fixture;
    o.dst = root.dir / name;
    o.experts = format;
    o.threads = 2;
    convert::convert(o);
    return done[name] = o.dst;
}

// One expert in a device slot: each matrix's quantized values and scales as in the
// container's record, rounded up to 16 bytes.
std::uint64_t expert_slot_bytes(const experts::ExpertStore& store) {
    const auto& r = store.layout();
    const auto one = [](const experts::MatrixSection& m) {
        return (static_cast<std::uint64_t>(m.data_bytes + m.scales_bytes) + 15) / 16 * 16;
    };
    return 2 * one(r.gate) + one(r.down);
}

std::shared_ptr<experts::ExpertCache> cache_for(const model::Model& m) {
    experts::CacheOptions o;
    o.cap = m.config.experts;
    o.pins = 0;
    o.io_threads = 2;
    return std::make_shared<experts::ExpertCache>(m.experts, o);
}

}  // namespace

TEST_CASE("vulkan int experts: a converted model's experts resident on the device give the CPU's tokens") {
    for (auto format : {experts::Format::Int8, experts::Format::Int4}) {
        for (const char* fixture : {"mixed-hf-f32", "base-release-bf16"}) {
            CAPTURE(fixture);
            CAPTURE(experts::format_name(format));
            auto model = model::load_model(converted(fixture, format));
            REQUIRE(model.experts);
            const auto& c = model.config;
            cpu::ThreadPool pool(2);
            forward::Forward cpu_fw(model, pool, cache_for(model)), dev_fw(model, pool, cache_for(model));
            auto chain = chain_or_skip(model);
            if (!chain) return;
            if (!chain->device().float64) {
                MESSAGE("no shaderFloat64 on " << chain->device().name << ": the experts stay on the host");
                CHECK(chain->tier_layers() == 0);
                return;
            }
            REQUIRE(chain->resident_layers() == sparse_layers(c));
            CHECK(std::string(chain->tier()->format()) == experts::format_name(format));
            // The bank holds each expert as the container does: quantized values and scales.
            CHECK(chain->expert_bytes() ==
                  expert_slot_bytes(*model.experts) * static_cast<std::uint64_t>(c.experts * sparse_layers(c)));
            dev_fw.set_chain(std::move(chain));
            const auto prompt = prompt_for(c, 19);
            const int decode = 12;
            check_same(greedy(cpu_fw, c, prompt, decode), greedy(dev_fw, c, prompt, decode), kBound);
            const auto& st = dev_fw.chain()->stats();
            CHECK(st.steps == static_cast<std::uint64_t>(1 + decode));
            CHECK(st.waits == st.steps);  // resident: one wait a step
            CHECK(st.host_pairs == 0);
            CHECK(st.device_pairs == static_cast<std::uint64_t>((19 + decode) * c.top_k * sparse_layers(c)));
        }
    }
}

TEST_CASE("vulkan int experts: the same budget holds 2.5x (int8) and 4.5x (int4) the f32 model's experts") {
    // mixed: D 64, expert width 16 (padded to 32 for int8/int4 rows: the down matrix pays
    // double here; at a real width the ratios are 4x / 6.4x from f32, 2x / 3.2x from bf16).
    auto* dev = test_ops::device();
    if (!dev || !dev->ctx->info().float64) return;
    auto f32 = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    const auto& c = f32.config;
    const int sparse = sparse_layers(c);
    const auto& f0 = f32.weights.layers[0].experts[0];
    const std::uint64_t per_f32 = f0.gate.bytes() + f0.up.bytes() + f0.down.bytes();
    const std::uint64_t budget = 2 * per_f32 * static_cast<std::uint64_t>(sparse);  // 2 f32 experts a layer
    vulkan::TierOptions to;
    to.inline_uploads = true;
    const vulkan::ExpertTier plain(*dev->ctx, *dev->ops, f32, c.layers, budget, to);
    CHECK(plain.slots(0) == 2);
    CHECK(plain.bytes() <= budget);
    for (auto [format, ratio] : {std::pair{experts::Format::Int8, 2.5}, std::pair{experts::Format::Int4, 4.5}}) {
        CAPTURE(experts::format_name(format));
        auto model = model::load_model(converted("mixed-hf-f32", format));
        const vulkan::ExpertTier tier(*dev->ctx, *dev->ops, model, c.layers, budget, to);
        CHECK(tier.bytes() <= budget);
        CHECK(tier.slots(0) >= ratio * plain.slots(0));
        CHECK(tier.bytes() == expert_slot_bytes(*model.experts) * tier.slots(0) * static_cast<std::uint64_t>(sparse));
    }
}

TEST_CASE("vulkan int experts: a tier of a few slots, eviction running, gives the CPU's tokens") {
    for (auto format : {experts::Format::Int8, experts::Format::Int4}) {
        CAPTURE(experts::format_name(format));
        auto model = model::load_model(converted("mixed-hf-f32", format));  // E=16, top-4
        const auto& c = model.config;
        cpu::ThreadPool pool(2);
        forward::Forward cpu_fw(model, pool, cache_for(model));
        const auto prompt = prompt_for(c, 17);
        const Trace want = greedy(cpu_fw, c, prompt, 14, 5);
        for (bool inline_uploads : {true, false}) {
            CAPTURE(inline_uploads);
            vulkan::ChainOptions o;
            o.expert_slots = 2;
            o.inline_uploads = inline_uploads;
            auto chain = chain_or_skip(model, o);
            if (!chain || !chain->device().float64) return;
            REQUIRE(chain->tier_layers() == sparse_layers(c));
            CHECK(chain->resident_layers() == 0);
            forward::Forward dev_fw(model, pool, cache_for(model));
            dev_fw.set_chain(std::move(chain));
            check_same(want, greedy(dev_fw, c, prompt, 14, 5), kBound);
            vulkan::Chain& ch = *dev_fw.chain();
            const auto& st = ch.stats();
            CHECK(st.steps == 4 + 14);
            CHECK(st.host_pairs > 0);
            CHECK(st.device_pairs > 0);
            CHECK(st.host_pairs + st.device_pairs == static_cast<std::uint64_t>((17 + 14) * c.top_k * sparse_layers(c)));
            CHECK(ch.tier()->counters().uploads > 0);
            CHECK(ch.tier()->counters().evictions > 0);
        }
    }
}

TEST_CASE("vulkan int experts: the tier starts from the usage history (a converted model's usage file)") {
    auto model = model::load_model(converted("mixed-hf-f32", experts::Format::Int4));
    const auto& c = model.config;
    experts::UsageHistory h(model.experts->header().layers, c.experts);
    for (std::size_t s = 0; s < h.layers().size(); ++s) {
        h.add(static_cast<int>(s), 9, 50);
        h.add(static_cast<int>(s), static_cast<int>(s) + 2, 20);
        h.add(static_cast<int>(s), 0, 1);
    }
    vulkan::ChainOptions o;
    o.expert_slots = 2;
    o.inline_uploads = true;
    o.history = &h;
    auto chain = chain_or_skip(model, o);
    if (!chain || !chain->device().float64) return;
    for (std::size_t s = 0; s < h.layers().size(); ++s) {
        const int layer = h.layers()[s];
        CAPTURE(layer);
        std::vector<int> want = {static_cast<int>(s) + 2, 9};
        CHECK(chain->tier()->experts_in_slots(layer) == want);
    }
    CHECK(chain->tier()->counters().uploads == 0);  // the first fill is not counted as the tier's learning
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool, cache_for(model)), dev_fw(model, pool, cache_for(model));
    dev_fw.set_chain(std::move(chain));
    const auto prompt = prompt_for(c, 11);
    check_same(greedy(cpu_fw, c, prompt, 6), greedy(dev_fw, c, prompt, 6), kBound);
}

TEST_CASE("vulkan int experts: a device lost mid-step or during an upload with int8 experts finishes on the CPU") {
    auto model = model::load_model(converted("mixed-hf-f32", experts::Format::Int8));
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool, cache_for(model));
    const auto prompt = prompt_for(model.config, 17);
    const Trace want = greedy(cpu_fw, model.config, prompt, 10, 6);
    {
        auto probe = chain_or_skip(model);
        if (!probe || !probe->device().float64) return;
    }
    // Resident: one submit a step (the prompt takes 1-3); a tier of 3 slots with uploads
    // between steps on this thread, so the same slots hold the same experts every run.
    lost_device_runs(model, pool, {}, prompt, 10, 6, want, {2, 7}, kBound);
    vulkan::ChainOptions o;
    o.expert_slots = 3;
    o.inline_uploads = true;
    lost_device_runs(model, pool, o, prompt, 10, 6, want, {3, 20}, kBound);
    // Lost during an int8 expert's upload (the second the tier makes, between two steps).
    o.fault_upload_at = 2;
    auto chain = chain_or_skip(model, o);
    REQUIRE(chain);
    forward::Forward dev_fw(model, pool, cache_for(model));
    dev_fw.set_chain(std::move(chain));
    check_same(want, greedy(dev_fw, model.config, prompt, 10, 6), kBound);
    CHECK(dev_fw.chain() == nullptr);
    CHECK(dev_fw.take_device_event().find("expert upload") != std::string::npos);
}
