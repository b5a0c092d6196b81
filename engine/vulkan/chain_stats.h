// The STATS frame's `device` object (protocol/PROTOCOL.md §6.7): what the Vulkan chain
// holds and how its steps spend their time, for the gateway's UI.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "engine/vulkan/chain.h"

namespace inkling::vulkan {

// {"mode":"cpu"} without a chain.
nlohmann::json device_stats(const Chain* chain, std::uint64_t tokens);

}  // namespace inkling::vulkan
