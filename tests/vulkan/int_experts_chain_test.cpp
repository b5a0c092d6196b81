// A converted model's int8 and int4 routed experts on the device (lavapipe in CI), the
// fixtures converted here with the converter `inkling convert --experts int8|int4` runs:
// resident (every expert in a slot, routing on the device) and as a tier forced small so
// eviction runs, each giving the CPU's greedy tokens; the tier's bytes are the quantized
// ones (more experts in the same budget); a device lost mid-step finishes on the CPU; a
// prompt chunk's cold experts streamed through staging buffers compute the bank's bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/convert/convert.h"
#include "engine/cpu/kernels.h"
#include "engine/experts/expert_cache.h"
#include "engine/forward/forward.h"
#include "engine/vulkan/chain.h"
#include "tests/engine/converted_fixtures.h"
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

using test_paths::converted;

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

// What the int8 quantization of a routed expert's activations sees is the same bits on the
// device and on the host: for the chain's own dense activations, the experts computed on the
// device (resident, routing there too; or a tier of two slots, the rest on the host) give
// the logits of the experts all computed on the host (--vk-experts off) bit for bit — the
// gate/up rows, the SwiGLU rows (shaders/pointwise.glsl: the CPU's steps), the routing and
// its weights — and so under every ISA of this CPU.
TEST_CASE("vulkan int experts: device experts give the host experts' bits on the chain's activations, every ISA") {
    const cpu::Isa was = cpu::active_isa();
    for (auto format : {experts::Format::Int8, experts::Format::Int4}) {
        for (const char* fixture : {"mixed-hf-f32", "base-release-bf16"}) {
            CAPTURE(fixture);
            CAPTURE(experts::format_name(format));
            auto model = model::load_model(converted(fixture, format));
            const auto& c = model.config;
            cpu::ThreadPool pool(2);
            const auto prompt = prompt_for(c, 17);
            std::vector<Trace> runs;
            for (cpu::Isa isa : cpu::isas()) {
                if (!cpu::isa_supported(isa)) continue;
                CAPTURE(std::string(cpu::isa_name(isa)));
                cpu::set_isa(isa);
                for (int mode : {0, 1, 2}) {  // host experts, resident, a tier of two slots
                    CAPTURE(mode);
                    vulkan::ChainOptions o;
                    if (mode == 0) o.expert_layers = 0;
                    if (mode == 2) o.expert_slots = 2, o.inline_uploads = true;
                    auto chain = chain_or_skip(model, o);
                    if (!chain) return;
                    if (mode > 0 && !chain->device().float64) {
                        MESSAGE("no shaderFloat64 on " << chain->device().name << ": the experts stay on the host");
                        cpu::set_isa(was);
                        return;
                    }
                    CHECK(chain->tier_layers() == (mode == 0 ? 0 : sparse_layers(c)));
                    forward::Forward fw(model, pool, cache_for(model));
                    fw.set_chain(std::move(chain));
                    runs.push_back(greedy(fw, c, prompt, 12, 5));
                    if (mode == 2) CHECK(fw.chain()->stats().device_pairs > 0);
                    if (mode == 2) CHECK(fw.chain()->stats().host_pairs > 0);
                    const Trace& first = runs.front();
                    CHECK(runs.back().tokens == first.tokens);
                    for (std::size_t i = 0; i < first.logits.size(); ++i)
                        CHECK(std::memcmp(runs.back().logits[i].data(), first.logits[i].data(),
                                          first.logits[i].size() * sizeof(float)) == 0);
                }
            }
        }
    }
    cpu::set_isa(was);
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
    to.stream_slots = 0;  // the banks' density alone (the stream area takes its share below)
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
        // With a stream area: at most a quarter of the budget, the banks in the rest.
        vulkan::TierOptions ts = to;
        ts.stream_slots = 16;
        const vulkan::ExpertTier streaming(*dev->ctx, *dev->ops, model, c.layers, budget, ts);
        CHECK(streaming.stream_batch() > 0);
        CHECK(streaming.stream_bytes() <= budget / 4);
        CHECK(streaming.bytes() + streaming.stream_bytes() <= budget);
        CHECK(streaming.slots(0) < tier.slots(0));
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

TEST_CASE("vulkan expert tier: a streamed expert computes the bank's bits") {
    // The same pairs through a resident bank (record_pairs) and through the stream area
    // (stage + record_stream, from staging buffers copied by the queue): bit for bit, for
    // experts in f32, bf16 (mapped) and int8/int4 (read from experts.inkx).
    auto* dev = test_ops::device();
    if (!dev) return;
    struct Case {
        const char* name;
        std::function<model::Model()> load;
    };
    const std::vector<Case> cases = {
        {"f32", [] { return model::load_model(test_paths::fixtures() / "mixed-hf-f32"); }},
        {"bf16", [] { return model::load_model(test_paths::fixtures() / "base-release-bf16"); }},
        {"int8", [] { return model::load_model(converted("mixed-hf-f32", experts::Format::Int8)); }},
        {"int4", [] { return model::load_model(converted("mixed-hf-f32", experts::Format::Int4)); }},
    };
    using vulkan::Buffer;
    for (const Case& k : cases) {
        CAPTURE(k.name);
        auto model = k.load();
        if (model.experts && !dev->ctx->info().float64) continue;
        const auto& c = model.config;
        vulkan::TierOptions resident_o;
        resident_o.inline_uploads = true;
        resident_o.slots = c.experts;
        const vulkan::ExpertTier resident(*dev->ctx, *dev->ops, model, c.layers, 1ull << 30, resident_o);
        vulkan::TierOptions stream_o = resident_o;
        stream_o.slots = 1;
        stream_o.stream_rows = 1;
        stream_o.stream_slots = 6;  // two halves of three
        vulkan::ExpertTier streaming(*dev->ctx, *dev->ops, model, c.layers, 1ull << 30, stream_o);
        REQUIRE(streaming.stream_batch() == 3);
        CHECK(streaming.stream_halves() == 2);
        const std::uint32_t R = 11, K = static_cast<std::uint32_t>(c.top_k), P = R * K;
        const std::uint32_t D = static_cast<std::uint32_t>(c.hidden), I = static_cast<std::uint32_t>(c.moe_inter);
        const std::vector<int> batch = {c.experts - 1, 2, 0};  // the last expert: the container's last record
        std::vector<float> h(static_cast<std::size_t>(R) * D);
        for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
        std::vector<std::uint32_t> route(P);
        for (std::uint32_t q = 0; q < P; ++q) route[q] = static_cast<std::uint32_t>(batch[q % batch.size()]);
        Buffer hb(*dev->ctx, h.size() * 4, Buffer::Kind::Device), rb(*dev->ctx, P * 4, Buffer::Kind::Device);
        hb.write(h.data(), h.size() * 4);
        rb.write(route.data(), P * 4);
        const std::size_t act = std::max<std::size_t>(resident.act_row_bytes(), 32);
        Buffer pg(*dev->ctx, std::size_t{P} * I * 4, Buffer::Kind::Device), pu(*dev->ctx, std::size_t{P} * I * 4, Buffer::Kind::Device);
        Buffer xq(*dev->ctx, P * act, Buffer::Kind::Device), xs(*dev->ctx, P * act / 8, Buffer::Kind::Device);
        std::vector<std::vector<float>> y;
        for (int side = 0; side < 2; ++side) {
            Buffer py(*dev->ctx, std::size_t{P} * D * 4, Buffer::Kind::Device);
            vulkan::Frame f(*dev->ctx);
            int layer = 0;
            while (!c.kinds[layer].sparse) ++layer;
            if (side == 0) {
                f.begin();
                resident.record_pairs(f, layer, P, K, hb, {&rb}, pg, pu, py, {&xq, &xs});
            } else {
                // Each expert's weights as the host holds them: the mapped checkpoint, or its
                // experts.inkx record read into RAM (the engine's cache has them so).
                std::vector<experts::AlignedBuffer> records;
                std::vector<model::Ffn> ffn;
                for (int e : batch) {
                    if (model.experts) {
                        records.push_back(experts::aligned_buffer(static_cast<std::size_t>(model.experts->record_bytes())));
                        model.experts->read(layer, e, records.back().get());
                        ffn.push_back(model.experts->view(records.back().get()));
                    } else {
                        ffn.push_back(model.weights.layers[layer].experts[static_cast<std::size_t>(e)]);
                    }
                }
                std::vector<const model::Ffn*> weights;
                for (const auto& x : ffn) weights.push_back(&x);
                streaming.stage(1, 0, std::span(batch).first(1), std::span(weights).first(1), nullptr);
                streaming.stage(1, 1, std::span(batch).subspan(1), std::span(weights).subspan(1), nullptr);
                f.begin();
                streaming.record_stream(f, layer, 1, batch, P, K, hb, {&rb}, pg, pu, py, {&xq, &xs});
            }
            f.run();
            y.emplace_back(std::size_t{P} * D);
            py.read(y.back().data(), y.back().size() * 4);
        }
        CHECK(std::memcmp(y[0].data(), y[1].data(), y[0].size() * 4) == 0);
        CHECK(std::any_of(y[1].begin(), y[1].end(), [](float v) { return v != 0.0f; }));
        const auto tc = streaming.counters();
        CHECK(tc.streamed == batch.size());
        CHECK(tc.uploads == 0);  // the bank's slot untouched: nothing learned without steps
    }
}

TEST_CASE("vulkan int experts: a prompt chunk's cold experts streamed to the device give the CPU's tokens") {
    // The streamed pairs are the bank's bits (above) and the CPU's integer products; the
    // device's SwiGLU rounds differently in the last bit, which can move an int8 activation
    // by one quantization step (1/127 of its row's largest) in a later layer. Seen with int4
    // here: max |Δlogit| 1.9e-2 from the prompt step on, the tokens equal (docs/vulkan.md,
    // "Cold experts of a prompt chunk").
    constexpr double kStreamBound = 5e-2;
    for (auto format : {experts::Format::Int8, experts::Format::Int4}) {
        const std::string fmt = experts::format_name(format);
        CAPTURE(fmt);
        auto model = model::load_model(converted("mixed-hf-f32", format));  // E=16, top-4
        const auto& c = model.config;
        cpu::ThreadPool pool(2);
        forward::Forward cpu_fw(model, pool, cache_for(model));
        const auto prompt = prompt_for(c, 23);
        const Trace want = greedy(cpu_fw, c, prompt, 8);
        for (std::uint32_t rows : {1u, 3u}) {
            CAPTURE(rows);
            vulkan::ChainOptions o;
            o.expert_slots = 2;
            o.inline_uploads = true;
            o.stream_rows = rows;
            o.stream_slots = 4;  // two halves of two: batches double buffered
            auto chain = chain_or_skip(model, o);
            if (!chain || !chain->device().float64) return;
            REQUIRE(chain->tier()->stream_batch() == 2);
            forward::Forward dev_fw(model, pool, cache_for(model));
            dev_fw.set_chain(std::move(chain));
            check_same(want, greedy(dev_fw, c, prompt, 8), kStreamBound);
            const auto& st = dev_fw.chain()->stats();
            CHECK(st.host_pairs + st.device_pairs == static_cast<std::uint64_t>((23 + 8) * c.top_k * sparse_layers(c)));
            CHECK(st.stream_pairs > 0);
            if (rows == 1) CHECK(st.host_pairs == 0);
            if (rows == 3) CHECK(st.host_pairs > 0);
            CHECK(dev_fw.chain()->tier()->counters().streamed > 0);
        }
    }
}
