// The expert residency map of the STATS frame: one byte per (MoE layer, expert),
// `tier << 6 | heat`. Tier: 0 = on disk, 1 = in RAM (a converted model: the expert sits in
// a slot of the expert cache; a mapped one: its pages are in the page cache, asked of the
// kernel with mincore), 2 = in a slot of the Vulkan chain's expert tier (resident or
// tier layers, vulkan/expert_tier.h). Heat: the bit length of
// how many rows were routed to the expert, capped at 63.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/experts/expert_cache.h"
#include "engine/model/weights.h"
#include "engine/vulkan/expert_tier.h"

namespace inkling::serve {

// `cache`: the converted model's expert cache (null for a mapped model); `tier`: the
// device's experts (null without one). `device` in the result counts tier 2.
nlohmann::json expert_residency(const model::Model& model, const std::vector<std::vector<std::uint64_t>>& uses,
                                const experts::ExpertCache* cache = nullptr,
                                const vulkan::ExpertTier* tier = nullptr);

// True when the page holding `p` is resident in memory.
bool page_resident(const void* p);

}  // namespace inkling::serve
