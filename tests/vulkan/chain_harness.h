// What the chain tests share: a chain (or a skip without a device), prompts, greedy runs
// compared step by step against the CPU forward.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/model/weights.h"
#include "engine/sampling/sampler.h"
#include "engine/vulkan/chain.h"
#include "engine/vulkan/frame.h"

namespace chain_harness {

using namespace inkling;


inline std::unique_ptr<vulkan::Chain> chain_or_skip(const model::Model& m, vulkan::ChainOptions o = {}) {
    try {
        return std::make_unique<vulkan::Chain>(m, o);
    } catch (const vulkan::Unavailable& e) {
        MESSAGE("no Vulkan device: " << e.what());
        return nullptr;
    }
}

// MoE layers of the model.
inline int sparse_layers(const model::Config& c) {
    int n = 0;
    for (int i = 0; i < c.layers; ++i) n += c.kinds[i].sparse;
    return n;
}

inline std::vector<std::int32_t> prompt_for(const model::Config& c, int n) {
    std::vector<std::int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(static_cast<std::int32_t>((i * 37 + 11) % c.unpadded_vocab));
    return ids;
}

inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
    return d;
}

// A greedy run: the prompt in `chunk`-sized steps, then `n` decode steps. Returns every
// step's last-row logits and the tokens.
struct Trace {
    std::vector<std::vector<float>> logits;
    std::vector<std::int32_t> tokens;
};
inline Trace greedy(forward::Forward& fw, const model::Config& c, const std::vector<std::int32_t>& prompt, int n,
             std::size_t chunk = 1000) {
    auto st = forward::make_session(c, static_cast<std::int64_t>(prompt.size()) + n + 1);
    Trace t;
    for (std::size_t at = 0; at < prompt.size(); at += chunk) {
        const std::size_t k = std::min(chunk, prompt.size() - at);
        t.logits.push_back(fw.step(st, std::span(prompt).subspan(at, k), nullptr, false));
    }
    for (int i = 0; i < n; ++i) {
        const auto next = static_cast<std::int32_t>(sampling::argmax(t.logits.back()));
        t.tokens.push_back(next);
        t.logits.push_back(fw.step(st, std::span(&next, 1), nullptr, false));
    }
    return t;
}

inline void check_same(const Trace& cpu, const Trace& dev, double bound = 1e-4) {
    CHECK(cpu.tokens == dev.tokens);
    REQUIRE(cpu.logits.size() == dev.logits.size());
    double worst = 0;
    for (std::size_t i = 0; i < cpu.logits.size(); ++i) worst = std::max(worst, max_diff(cpu.logits[i], dev.logits[i]));
    CHECK(worst <= bound);
}


// Greedy runs of `prompt` (+ `decode` tokens, prefill in `chunk`s) on a chain made with
// `o`, the device lost at each of `at` submits from the run's start: every run must give
// the CPU's tokens (`want`, logits within `bound`), drop the chain and report the loss once.
inline void lost_device_runs(const model::Model& model, cpu::ThreadPool& pool, const vulkan::ChainOptions& o,
                             const std::vector<std::int32_t>& prompt, int decode, std::size_t chunk, const Trace& want,
                             std::initializer_list<std::uint64_t> at, double bound = 1e-4) {
    for (std::uint64_t k : at) {
        CAPTURE(k);
        forward::Forward dev_fw(model, pool);
        auto chain = chain_or_skip(model, o);
        if (!chain) return;
        dev_fw.set_chain(std::move(chain));
        vulkan::Frame::set_fault_at(vulkan::Frame::submits() + k);
        const Trace got = greedy(dev_fw, model.config, prompt, decode, chunk);
        vulkan::Frame::set_fault_at(0);
        check_same(want, got, bound);
        CHECK(dev_fw.chain() == nullptr);
        CHECK(dev_fw.take_device_event().find("device lost") != std::string::npos);
        CHECK(dev_fw.take_device_event().empty());
    }
}

}  // namespace chain_harness
