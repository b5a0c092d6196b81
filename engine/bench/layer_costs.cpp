#include "engine/bench/layer_costs.h"

#include <algorithm>

namespace inkling::bench {

nlohmann::json layer_costs(const model::Config& config, const forward::PhaseTimes& before,
                           const forward::PhaseTimes& after, int tokens) {
    const double per = 1e3 / std::max(tokens, 1);
    auto ms = [&](double a, double b) {
        return nlohmann::json{{"ms", (b - a) * 1e3}, {"ms_per_token", (b - a) * per}};
    };
    nlohmann::json layers = nlohmann::json::array();
    for (int i = 0; i < config.layers; ++i) {
        const auto at = static_cast<std::size_t>(i);
        const double a = at < before.layers.size() ? before.layers[at] : 0.0;
        const double b = at < after.layers.size() ? after.layers[at] : 0.0;
        if (b <= a) continue;  // not run on the CPU
        nlohmann::json row = ms(a, b);
        row["layer"] = i;
        row["mlp"] = config.kinds[at].sparse ? "moe" : "dense";
        row["attention"] = config.kinds[at].local ? "sliding" : "global";
        layers.push_back(std::move(row));
    }
    return {{"tokens", tokens},
            {"embed", ms(before.embed, after.embed)},
            {"lm_head", ms(before.head, after.head)},
            {"layers", std::move(layers)},
            {"phases_ms",
             {{"attention", (after.attention - before.attention) * 1e3},
              {"router", (after.router - before.router) * 1e3},
              {"experts", (after.experts - before.experts) * 1e3},
              {"expert_io", (after.expert_io - before.expert_io) * 1e3},
              {"dense_mlp", (after.dense - before.dense) * 1e3},
              {"convs_norms", (after.convs_norms - before.convs_norms) * 1e3}}}};
}

}  // namespace inkling::bench
