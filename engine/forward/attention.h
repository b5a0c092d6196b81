// Inkling attention on the CPU, once: the forward's attention block and the host's share
// of a layer the Vulkan chain splits (older positions attended on the host, the device's
// online softmax starting from the host's statistics) both run attend_heads (attention.cpp).
//
// score(t) = (q·k_t / hd + bias(p − t)) · tau, bias(e) = Σ_d r[d]·bank[d][e] for e < extent
// (else 0), softmax over the visible positions, output Σ p_t·v_t.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/forward/backend.h"
#include "engine/model/config.h"

namespace inkling::forward {

// One layer's attention inputs for a batched step: the step's fresh rows (after the K/V
// convs and the head norms) and the sessions whose caches hold the older positions.
struct AttentionView {
    const model::Config& config;
    int layer;
    const float* bank;  // [d_rel][extent]
    std::span<const Span> spans;
    const float* q;  // [R][H][hd]
    const float* k;  // [R][KV][hd]
    const float* v;  // [R][KV][hd]
    const float* r;  // [R][H][d_rel]
};

// Every row and head over every position it sees (the sliding window on local layers):
// out [R][H][hd]. One job per row and group of heads sharing a KV head (their keys and
// values read once for the group) on `pool` when the work is worth it; a head's output is
// the same bits whatever the grouping.
void attend(const AttentionView& a, std::int64_t rows, cpu::ThreadPool* pool, float* out);

// Statistics mode, for span `span` alone: its rows over cache positions [0, lo) only, the
// softmax left open: out [R][H][hd + 2] per (row, head) = max score, Σ e_t, then
// Σ e_t·v_t (e_t = exp(score − max)), at the span's batch rows.
void attend_stats(const AttentionView& a, std::size_t span, std::int64_t lo, cpu::ThreadPool* pool, float* out);

}  // namespace inkling::forward
