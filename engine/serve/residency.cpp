#include "engine/serve/residency.h"

#include <bit>

#include "platform/memory.h"

namespace inkling::serve {

bool page_resident(const void* p) { return platform::page_resident(p); }

nlohmann::json expert_residency(const model::Model& model, const std::vector<std::vector<std::uint64_t>>& uses,
                                const experts::ExpertCache* cache, const vulkan::ExpertTier* tier) {
    const auto& c = model.config;
    static const char* hex = "0123456789abcdef";
    std::string map;
    int rows = 0;
    std::uint64_t resident = 0, total = 0, on_device = 0;
    for (int i = 0; i < c.layers; ++i) {
        if (!c.kinds[i].sparse) continue;
        ++rows;
        const auto& experts = model.weights.layers[i].experts;
        for (int e = 0; e < c.experts; ++e) {
            bool ram = false;
            if (cache) {
                ram = cache->resident(i, e);
            } else {
                // An expert counts as in RAM when the first and last pages of each of its
                // three matrices are.
                const auto& f = experts[e];
                ram = page_resident(f.gate.data) && page_resident(f.up.data) && page_resident(f.down.data) &&
                      page_resident(f.down.row(f.down.rows - 1) + model::dtype_bytes(f.down.dtype, f.down.cols) - 1);
            }
            std::uint64_t n = i < static_cast<int>(uses.size()) && e < static_cast<int>(uses[i].size()) ? uses[i][e] : 0;
            unsigned heat = std::min<unsigned>(63, static_cast<unsigned>(std::bit_width(n)));
            const bool device = tier && tier->slot_of(i, e) != vulkan::ExpertTier::kNoSlot;
            const unsigned level = device ? 2u : ram ? 1u : 0u;
            unsigned byte = level << 6 | heat;
            map += hex[byte >> 4];
            map += hex[byte & 15];
            resident += device || ram;
            on_device += device;
            ++total;
        }
    }
    return {{"rows", rows}, {"cols", c.experts}, {"map", map}, {"resident", resident}, {"device", on_device},
            {"total", total}};
}

}  // namespace inkling::serve
