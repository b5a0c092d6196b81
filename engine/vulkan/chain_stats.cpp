#include "engine/vulkan/chain_stats.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace inkling::vulkan {

nlohmann::json device_stats(const Chain* chain, std::uint64_t tokens) {
    if (!chain) return {{"mode", "cpu"}};
    const ChainStats& s = chain->stats();
    const auto per = [](double a, std::uint64_t b) { return b ? a / static_cast<double>(b) : 0.0; };
    // The tier's slots over its banks and its upload/eviction counts (the web UI's Device card).
    const ExpertTier* tier = chain->tier();
    std::uint64_t slots = 0;
    if (tier)
        for (int i = 0; i < chain->layers(); ++i) slots += tier->slots(i);
    const ExpertTier::Counters tc = tier ? tier->counters() : ExpertTier::Counters{};
    // STATS names the formats in lower case (docs/vulkan.md); the tier says F32/BF16 as the tensors do.
    std::string format = tier ? tier->format() : "";
    std::transform(format.begin(), format.end(), format.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
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
            {"expert_format", format},
            {"tier_slots", slots},
            {"tier_uploads", tc.uploads},
            {"tier_evictions", tc.evictions},
            {"device_pairs", s.device_pairs},
            {"host_pairs", s.host_pairs},
            {"stream_pairs", s.stream_pairs},
            {"tier_streamed", tc.streamed},
            {"tier_stream_bytes", tc.stream_bytes},
            {"state_uploads", s.uploads},
            {"split_layers", s.split_layers},
            {"device_ms", s.device_wait_s * 1e3},
            {"host_record_ms", s.host_s * 1e3},
            {"tokens", tokens}};
}

}  // namespace inkling::vulkan
