// Whether the engine computes on a Vulkan device: the `--vulkan auto|on|off|prompts`,
// `--vk-device`, `--vk-layers`, `--vk-budget-mb` and `--vk-experts` flags of run/serve/eval/bench.
// auto: on for a discrete or integrated GPU, off on a CPU driver such as lavapipe;
// on: any device (lavapipe included), and a missing device is an error; prompts: like
// auto, for prompt steps only (decode stays on the CPU).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/model/weights.h"
#include "engine/vulkan/chain.h"

namespace inkling::vulkan {

struct VulkanFlags {
    std::string mode = "auto";
    int device = -1;
    int layers = -1;
    std::uint64_t budget_mb = 0;
    std::string experts = "auto";  // --vk-experts: auto, off or a count of MoE layers
    bool profile = false;          // --vk-profile
    std::uint32_t submit_dispatches = 64;  // --vk-submit-dispatches (ChainOptions)
    std::uint32_t gemm_rows = 32;          // --vk-gemm-rows (ChainOptions)
    std::uint32_t stream_rows = 8;         // --vk-stream-rows (ChainOptions)
    int stream_slots = 16;                 // --vk-stream-slots (ChainOptions)
    const experts::UsageHistory* history = nullptr;  // the expert cache's, seeding the tier (ChainOptions)
    // Called after each layer's weights reach the device (done of total): load progress.
    std::function<void(std::uint64_t done, std::uint64_t total)> on_layer;
};

// Opens the chain when the flags and the system say so, printing one line to stderr that
// says what runs where and why; nullptr means the CPU does everything. Throws
// std::runtime_error for a bad mode, or when `on` finds no usable device.
std::unique_ptr<Chain> open_chain(const model::Model& model, const VulkanFlags& flags);

}  // namespace inkling::vulkan
