// A MoE layer's routing and its routed experts on the host: top-k selection by sigmoid +
// correction bias, combine weights normalised together with the shared experts', the
// usage counts, and the expert rounds through a converted model's RAM cache (at most
// `cap` experts a round, increasing id, so every cap gives bitwise the same sums).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/experts/expert_cache.h"
#include "engine/forward/backend.h"
#include "engine/forward/meter.h"
#include "engine/model/weights.h"

namespace inkling::forward {

class HostExperts {
public:
    HostExperts(const model::Model& model, Meter& meter, std::shared_ptr<experts::ExpertCache> cache);

    // Routing of `rows` rows from the router's logits [rows][E+NS]; counts each expert's
    // rows and starts reading the experts the next sparse layer will likely pick (from h,
    // the MoE input).
    Routing route(int layer, std::int64_t rows, const float* logits, const float* h);

    // out [rows][D] = Σ routed contributions in increasing expert id; with `shared` also
    // + Σ_j w_j·shared_j(h) (summed on their own first), the shared experts computed in
    // the first round's grouped pass. `then`: the weights the step reads next (the next
    // layer's first products), warmed once the last down projections are done.
    void run(int layer, const Routing& routing, std::int64_t rows, const float* h, float* out, bool shared,
             std::span<const model::Matrix* const> then = {});

    // The outputs of `experts` (sorted; each used by the routing) for their rows, unweighted:
    // row n of expert e (routing.by_expert[e][n]) into y + pair_of[e][n]·D. The device tier
    // joins them with its own pairs.
    void run_pairs(int layer, const Routing& routing, std::span<const int> experts, std::int64_t rows,
                   const float* h, const std::vector<std::vector<std::int64_t>>& pair_of, float* y);

    // Calls fn(ids, weights) over `experts` of `layer` in rounds the RAM cache can hold at
    // once (all at once without a cache), each expert's weights valid during its call: the
    // device tier packs the experts it streams from here, hits of the cache and all.
    using Visit = std::function<void(std::span<const int>, const std::vector<const model::Ffn*>&)>;
    void visit(int layer, std::span<const int> experts, const Visit& fn);

    // Counts the pairs a device routed (one expert id per (row, k) pair).
    void record(int layer, std::span<const std::uint32_t> experts);

    // Rows routed to each expert so far: [layer][expert] (empty on dense layers).
    const std::vector<std::vector<std::uint64_t>>& uses() const { return uses_; }
    experts::ExpertCache* cache() const { return cache_.get(); }

private:
    // One round's experts over their rows: contributions weighted into `out`, or with
    // `pair_of` each row's output unweighted at its pair's row of `out`; with `shared_y`
    // also the shared experts over every row, shared expert j's outputs at
    // shared_y + j·rows·D. `then` is warmed once its down projections are done
    // (cpu::matmul_group's `next`).
    void round(int layer, std::span<const int> ids, const std::vector<const model::Ffn*>& f, const Routing& routing,
               std::int64_t rows, const float* h, float* out, float* shared_y,
               std::span<const model::Matrix* const> then,
               const std::vector<std::vector<std::int64_t>>* pair_of = nullptr);
    // The rounds over `ids` through the cache (or the mapped experts).
    template <class Round>
    void rounds(int layer, std::span<const int> ids, Meter::Clock::time_point& t, Round&& round);
    void prefetch_after(int layer, std::int64_t rows, const float* h);

    const model::Config& c_;
    const model::Weights& w_;
    Meter& meter_;
    std::shared_ptr<experts::ExpertCache> cache_;
    std::vector<std::vector<std::uint64_t>> uses_;
    // Buffers kept across layers and steps (cpu::at_least): a round's inputs, products and
    // outputs; the shared experts' outputs and their weighted sum.
    std::vector<float> arena_, shared_y_, shared_sum_;
};

}  // namespace inkling::forward
