#include "engine/vulkan/chain_stats.h"

namespace inkling::vulkan {

nlohmann::json device_stats(const Chain* chain, std::uint64_t tokens) {
    if (!chain) return {{"mode", "cpu"}};
    const ChainStats& s = chain->stats();
    const auto per = [](double a, std::uint64_t b) { return b ? a / static_cast<double>(b) : 0.0; };
    return {{"mode", "vulkan"},
            {"name", chain->device().name},
            {"type", chain->device().type_name()},
            {"memory_used", chain->memory_used()},
            {"memory_budget", chain->memory_budget()},
            {"layers", chain->layers()},
            {"lm_head", chain->full()},
            {"steps", s.steps},
            {"frames", s.frames},
            {"frames_per_step", per(static_cast<double>(s.frames), s.steps)},
            {"waits", s.waits},
            {"dispatches_per_step", per(static_cast<double>(s.dispatches), s.steps)},
            {"barriers_per_step", per(static_cast<double>(s.barriers), s.steps)},
            {"waits_per_step", per(static_cast<double>(s.waits), s.steps)},
            {"expert_layers", chain->resident_layers()},
            {"expert_bytes", chain->expert_bytes()},
            {"tier_layers", chain->tier_layers()},
            {"expert_format", chain->tier() ? chain->tier()->format() : ""},
            {"device_pairs", s.device_pairs},
            {"host_pairs", s.host_pairs},
            {"state_uploads", s.uploads},
            {"split_layers", s.split_layers},
            {"device_ms", s.device_wait_s * 1e3},
            {"host_record_ms", s.host_s * 1e3},
            {"tokens", tokens}};
}

}  // namespace inkling::vulkan
