#include "gateway/engines/residency.h"

#include <algorithm>

namespace inkling::gateway {

RoomPlan make_room(const std::vector<Residency>& models, std::size_t want, std::uint64_t budget) {
    RoomPlan plan;
    if (budget == 0) {
        plan.fits = true;
        return plan;
    }
    std::uint64_t used = 0;
    for (std::size_t i = 0; i < models.size(); ++i)
        if (i != want && models[i].resident) used += models[i].bytes;
    const std::uint64_t need = models[want].bytes;
    if (need > budget) return plan;
    std::vector<std::size_t> idle;
    for (std::size_t i = 0; i < models.size(); ++i)
        if (i != want && models[i].resident && models[i].unloadable) idle.push_back(i);
    std::stable_sort(idle.begin(), idle.end(),
                     [&](std::size_t a, std::size_t b) { return models[a].last_used < models[b].last_used; });
    for (std::size_t i : idle) {
        if (used + need <= budget) break;
        used -= models[i].bytes;
        plan.unload.push_back(i);
    }
    plan.fits = used + need <= budget;
    if (!plan.fits) plan.unload.clear();  // unloading would not make room: keep them
    return plan;
}

std::vector<std::size_t> idle_expired(const std::vector<Residency>& models, Residency::Clock::time_point now,
                                      Residency::Clock::duration timeout) {
    std::vector<std::size_t> out;
    if (timeout <= Residency::Clock::duration::zero()) return out;
    for (std::size_t i = 0; i < models.size(); ++i)
        if (models[i].resident && models[i].unloadable && now - models[i].last_used >= timeout) out.push_back(i);
    return out;
}

Residency::Clock::time_point next_idle_expiry(const std::vector<Residency>& models, Residency::Clock::duration timeout) {
    auto next = Residency::Clock::time_point::max();
    if (timeout <= Residency::Clock::duration::zero()) return next;
    for (const auto& m : models)
        if (m.resident && m.unloadable) next = std::min(next, m.last_used + timeout);
    return next;
}

}  // namespace inkling::gateway
