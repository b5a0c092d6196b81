#include "engine/vulkan/setup.h"

#include <cstdio>
#include <stdexcept>

namespace inkling::vulkan {
namespace {

int parse_expert_layers(const std::string& v) {
    if (v == "auto") return -1;
    if (v == "off") return 0;
    try {
        std::size_t used = 0;
        const int n = std::stoi(v, &used);
        if (used == v.size() && n >= 0) return n;
    } catch (const std::exception&) {
    }
    throw std::runtime_error("--vk-experts " + v + ": expected auto, off or a number of MoE layers");
}

}  // namespace

std::unique_ptr<Chain> open_chain(const model::Model& model, const VulkanFlags& f) {
    if (f.mode != "auto" && f.mode != "on" && f.mode != "off" && f.mode != "prompts")
        throw std::runtime_error("--vulkan " + f.mode + ": expected auto, on, off or prompts");
    if (f.mode == "off") return nullptr;
    const bool forced = f.mode == "on";
    try {
        if (!forced) {
            // auto/prompts: only a real GPU (the chosen one, or the best ranked).
            const auto devices = list_devices();
            const DeviceInfo* pick = nullptr;
            if (f.device >= 0 && f.device < static_cast<int>(devices.size())) pick = &devices[f.device];
            for (const auto& d : devices)
                if (!pick && (d.type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
                              d.type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU))
                    pick = &d;
            if (!pick || pick->is_cpu()) {
                std::fprintf(stderr, "[vulkan] off: no GPU (%s); --vulkan on uses a CPU driver too\n",
                             pick ? (pick->name + " is a CPU driver").c_str()
                                  : (devices.empty() ? "no device" : devices[0].name + " is a CPU driver").c_str());
                return nullptr;
            }
        }
        ChainOptions o;
        o.device = f.device;
        o.layers = f.layers;
        o.budget = f.budget_mb << 20;
        o.expert_layers = parse_expert_layers(f.experts);
        o.profile = f.profile;
        o.submit_dispatches = f.submit_dispatches;
        o.gemm_rows = f.gemm_rows;
        o.stream_rows = f.stream_rows;
        o.stream_slots = f.stream_slots;
        o.on_layer = f.on_layer;
        o.history = f.history;
        auto chain = std::make_unique<Chain>(model, o);
        std::fprintf(stderr,
                     "[vulkan] ready: %s (%s), %d of %d layers on the device%s, routed experts of %d MoE layers "
                     "resident (%.1f MiB), %.1f of %.1f MiB, %s\n",
                     chain->device().name.c_str(), chain->device().type_name(), chain->layers(),
                     model.config.layers, chain->full() ? " and lm_head" : " (the CPU runs the rest)",
                     chain->resident_layers(), chain->expert_bytes() / 1048576.0, chain->memory_used() / 1048576.0,
                     chain->memory_budget() / 1048576.0, f.mode == "prompts" ? "prompt steps only" : "every step");
        return chain;
    } catch (const Unavailable& e) {
        if (forced) throw std::runtime_error(std::string("--vulkan on: ") + e.what());
        std::fprintf(stderr, "[vulkan] off: %s\n", e.what());
    } catch (const OutOfBudget& e) {
        // The plan's estimate of what fits was short of what the driver allocated.
        if (forced) throw std::runtime_error(std::string("--vulkan on: the model's weights do not fit: ") + e.what());
        std::fprintf(stderr, "[vulkan] off: the model's weights do not fit: %s\n", e.what());
    } catch (const Declined& e) {
        if (forced) throw std::runtime_error(std::string("--vulkan on: the chain declines this model: ") + e.what());
        std::fprintf(stderr, "[vulkan] off: the chain declines this model: %s\n", e.what());
    }
    return nullptr;
}

}  // namespace inkling::vulkan
