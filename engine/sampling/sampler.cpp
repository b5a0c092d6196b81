#include "engine/sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <utility>

#include "engine/sampling/weights.h"

namespace inkling::sampling {

std::int32_t argmax(std::span<const float> values) {
    // The first index of the largest value, NaNs never winning a comparison (and a NaN
    // first value never losing one: index 0 then). Two passes, the first over 16
    // independent lanes that the compiler vectorizes: a greedy decode step scans the whole
    // vocabulary, which one compare-and-branch a value made ~1 % of a mid-model token.
    const std::size_t n = values.size();
    const float* v = values.data();
    if (n == 0 || std::isnan(v[0])) return 0;
    constexpr std::size_t kLanes = 16;
    float lane[kLanes];
    std::fill(lane, lane + kLanes, v[0]);
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::size_t l = 0; l < kLanes; ++l) lane[l] = v[i + l] > lane[l] ? v[i + l] : lane[l];
    float best = v[0];
    for (float x : lane) best = x > best ? x : best;
    for (; i < n; ++i) best = v[i] > best ? v[i] : best;
    std::size_t at = 0;
    while (!(v[at] == best)) ++at;
    return static_cast<std::int32_t>(at);
}

std::vector<std::int32_t> largest(std::span<const float> values, std::size_t k) {
    // A heap of the best k so far, the worst of them on top. Values come in index order, so a
    // later value equal to the worst is not better (its index is higher): only a strictly
    // greater one displaces it, and NaN never is.
    auto better = [&](std::int32_t a, std::int32_t b) { return values[a] > values[b] || (values[a] == values[b] && a < b); };
    std::vector<std::int32_t> best;
    if (k == 0) return best;
    best.reserve(std::min(k, values.size()));
    std::size_t i = 0;
    for (; i < values.size() && best.size() < k; ++i)
        if (!std::isnan(values[i])) {
            best.push_back(static_cast<std::int32_t>(i));
            std::push_heap(best.begin(), best.end(), better);
        }
    for (; i < values.size(); ++i) {
        if (!(values[i] > values[static_cast<std::size_t>(best.front())])) continue;
        std::pop_heap(best.begin(), best.end(), better);
        best.back() = static_cast<std::int32_t>(i);
        std::push_heap(best.begin(), best.end(), better);
    }
    std::sort(best.begin(), best.end(), better);
    return best;
}

namespace {

// argmax, except that a NaN first value does not win either (the sampler never draws a NaN):
// the first largest number, or 0 in a row of NaNs. argmax's vectorized scan unless the row
// starts with a NaN.
std::int32_t largest_number(std::span<const float> values) {
    if (values.empty() || !std::isnan(values[0])) return argmax(values);
    const std::vector<std::int32_t> top = largest(values, 1);
    return top.empty() ? 0 : top[0];
}

}  // namespace

double log_sum_exp(std::span<const float> values) {
    if (values.empty()) return -INFINITY;
    const float mx = values[static_cast<std::size_t>(largest_number(values))];
    if (std::isnan(mx)) return -INFINITY;  // all NaN: no mass
    if (!std::isfinite(mx)) return mx;     // +inf dominates; all -inf has no mass
    // The sampler's weights at T = 1, a stack buffer's worth at a time (a logprobs request
    // takes this on every token: std::exp in double over 201,024 logits took 1.3 ms).
    constexpr std::size_t kChunk = 2048;
    float w[kChunk];
    double total = 0.0;
    for (std::size_t at = 0; at < values.size(); at += kChunk) {
        const std::size_t n = std::min(kChunk, values.size() - at);
        softmax_weights(values.subspan(at, n), mx, 1.0f, std::span(w, n));
        total += sum_weights(std::span<const float>(w, n));
    }
    return mx + std::log(total);
}

namespace {

// Weights (≥ 0) order as their bits do; the top 16 bits (exponent and 7 mantissa bits, a
// bucket spanning under 1 % of its values) give a histogram that finds the top-p cut while
// comparing only the boundary bucket's entries. Weights are at most 1 (the
// largest logit's), so the buckets end at 1.0's.
constexpr int kBucketShift = 16;
constexpr std::size_t kBuckets = (0x3f800000u >> kBucketShift) + 1;
inline std::size_t bucket(float w) { return std::bit_cast<std::uint32_t>(w) >> kBucketShift; }

// Draws i with probability w[i] / Σ w, walking the ids in order: each block of ids' weight
// first (sum_weights), then only the block the draw lands in, one entry at a time.
std::int32_t draw_in_id_order(std::span<const float> w, double u, std::vector<double>& block) {
    constexpr std::size_t kBlock = 1024;
    const std::size_t n = w.size(), blocks = (n + kBlock - 1) / kBlock;
    block.resize(blocks);
    double total = 0.0;
    for (std::size_t b = 0; b < blocks; ++b) total += (block[b] = sum_weights(w.subspan(b * kBlock, std::min(kBlock, n - b * kBlock))));
    const double target = u * total;
    double acc = 0.0;
    std::size_t last = n;  // the last id of positive weight walked (a rounding fallback)
    for (std::size_t b = 0; b < blocks; ++b) {
        if (!(block[b] > 0.0)) continue;
        const std::size_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
        if (acc + block[b] > target) {
            for (std::size_t i = lo; i < hi; ++i) {
                if (!(w[i] > 0.0f)) continue;
                last = i;
                if ((acc += w[i]) > target) return static_cast<std::int32_t>(i);
            }
            return static_cast<std::int32_t>(last);
        }
        acc += block[b];
        for (std::size_t i = hi; i-- > lo;)
            if (w[i] > 0.0f) {
                last = i;
                break;
            }
    }
    return last < n ? static_cast<std::int32_t>(last) : argmax(w);
}

}  // namespace

Sampler::Sampler(const Params& params) : p_(params), rng_(params.seed) {}

std::int32_t Sampler::next(std::span<const float> logits, std::span<const std::int32_t> history) {
    std::span<const float> row = logits;  // copied only when the penalty changes it
    if (p_.repetition_penalty != 1.0) {
        work_.assign(logits.begin(), logits.end());
        row = work_;
        const float pen = static_cast<float>(p_.repetition_penalty);
        for (std::int32_t id : history) {
            if (id < 0 || static_cast<std::size_t>(id) >= work_.size()) continue;
            // From the original logit, so an id seen several times is penalised once.
            float original = logits[static_cast<std::size_t>(id)];
            work_[id] = original > 0 ? original / pen : original * pen;
        }
    }
    if (p_.temperature <= 0.0 || row.empty()) return argmax(row);
    const std::size_t V = row.size();
    const std::size_t k = p_.top_k > 0 ? std::min<std::size_t>(p_.top_k, V) : V;
    // The largest logit: top-k's first candidate (no pass of its own), or the row's.
    if (k < V) order_ = largest(row, k);
    const std::int32_t best = k < V ? (order_.empty() ? 0 : order_[0]) : largest_number(row);
    // +inf takes every draw; a row of NaNs has nothing to draw from.
    const float mx = row[static_cast<std::size_t>(best)];
    if (!std::isfinite(mx)) return best;

    // 1/T capped at the largest float: a tiny T keeps the largest logit's weight 0 · cap = 0
    // → e^0 = 1 (an infinite 1/T would make it NaN) and every other weight 0.
    const float inv_t = static_cast<float>(std::min(1.0 / p_.temperature, static_cast<double>(FLT_MAX)));
    // A uniform double in [0, 1) from 53 random bits: the same on every platform.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    if (k < V) return draw_top_k(row, mx, inv_t, u);
    weight_.resize(V);
    softmax_weights(row, mx, inv_t, weight_);
    if (p_.top_p < 1.0) return draw_nucleus(u);
    return draw_in_id_order(weight_, u, block_);
}

// order_ holds the ids of the k largest logits (ties: lower id first; as transformers'
// top-k, which keeps the top k scores; fewer where the rest are NaN): top-p among them, then
// a draw in that order. Only the k need weights.
std::int32_t Sampler::draw_top_k(std::span<const float> row, float mx, float inv_t, double u) {
    weight_.resize(order_.size());
    for (std::size_t i = 0; i < order_.size(); ++i)
        weight_[i] = exp_nonpositive((row[static_cast<std::size_t>(order_[i])] - mx) * inv_t);
    const std::span<const float> w = weight_;
    std::size_t keep = w.size();
    double total = 0.0;
    for (float x : w) total += x;
    if (p_.top_p < 1.0) {
        // The smallest prefix whose mass reaches top_p of the k (at least one).
        double acc = 0.0;
        for (std::size_t i = 0; i < w.size(); ++i) {
            acc += w[i];
            if (acc >= p_.top_p * total) {
                keep = i + 1;
                break;
            }
        }
        total = acc;
    }
    double acc = 0.0, target = u * total;
    for (std::size_t i = 0; i < keep; ++i)
        if ((acc += w[i]) > target) return order_[i];
    return order_[keep - 1];
}

// order_ (one bucket's ids, ascending) most probable first, ties by id. A bucket's weights
// share their top 16 bits, so a large one (near-equal logits: 19 ms a draw through a
// comparison sort of 200,000 ids) is put in order by a counting sort on the low 16 bits,
// from the largest; ids stay ascending among equal weights.
void Sampler::sort_bucket() {
    const std::span<const float> w = weight_;
    constexpr std::size_t kCompareUpTo = 2048;
    if (order_.size() <= kCompareUpTo) {
        std::sort(order_.begin(), order_.end(),
                  [&](std::int32_t a, std::int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
        return;
    }
    constexpr std::size_t kLow = std::size_t{1} << kBucketShift;
    auto low = [&](std::int32_t i) { return std::bit_cast<std::uint32_t>(w[static_cast<std::size_t>(i)]) & (kLow - 1); };
    start_.assign(kLow, 0);
    for (std::int32_t i : order_) ++start_[low(i)];
    std::uint32_t at = 0;
    for (std::size_t k = kLow; k-- > 0;) at += std::exchange(start_[k], at);
    sorted_.resize(order_.size());
    for (std::int32_t i : order_) sorted_[start_[low(i)]++] = i;
    order_.swap(sorted_);
}

// The smallest set of most probable ids (ties: lower id first) whose mass reaches top_p of
// the whole: the buckets' masses from the top find the bucket the cut falls in, and only
// that bucket's entries are sorted. The set is then every id before the cut's entry in that
// order, and the draw walks it in id order: the same distribution as walking it most
// probable first, without sorting what lies above the cut (most of the vocabulary when the
// logits are flat).
std::int32_t Sampler::draw_nucleus(double u) {
    const std::span<const float> w = weight_;
    const double goal = p_.top_p * sum_weights(w);
    mass_.assign(kBuckets, 0.0);
    for (float x : w) mass_[bucket(x)] += x;
    std::size_t edge = kBuckets;
    double above = 0.0;
    while (edge > 0 && above + mass_[edge - 1] < goal) above += mass_[--edge];
    if (edge == 0) return draw_in_id_order(w, u, block_);  // rounding: all of it
    --edge;
    order_.clear();
    for (std::size_t i = 0; i < w.size(); ++i)
        if (bucket(w[i]) == edge) order_.push_back(static_cast<std::int32_t>(i));
    sort_bucket();
    std::int32_t cut = order_.back();
    for (std::int32_t i : order_)
        if ((above += w[i]) >= goal) {
            cut = i;
            break;
        }
    // What lies past the cut weighs nothing in the draw.
    const float wc = weight_[static_cast<std::size_t>(cut)];
    const auto after = static_cast<std::size_t>(cut) + 1;
    drop_below(std::span(weight_).first(after), wc, false);
    drop_below(std::span(weight_).subspan(after), wc, true);
    return draw_in_id_order(weight_, u, block_);
}

}  // namespace inkling::sampling
