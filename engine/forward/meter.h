// What a forward's steps read and where their time went, shared by the CPU backend and
// the host's experts; and the matmuls that count their weight bytes as they run.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/tensor.h"

namespace inkling::forward {

// Seconds spent in each phase over all steps so far.
struct PhaseTimes {
    double embed = 0, attention = 0, router = 0, experts = 0, dense = 0, convs_norms = 0, head = 0;
    double expert_io = 0;  // waiting for the expert cache to read experts in
    // Each layer's wall time on the CPU backend (attention, router, experts or dense MLP,
    // convs and norms together), by layer index: the benchmark's per-layer cost. Layers the
    // Vulkan chain runs are not in it.
    std::vector<double> layers;
};

class Meter {
public:
    explicit Meter(cpu::ThreadPool& pool) : pool_(pool) {}

    cpu::ThreadPool& pool() const { return pool_; }
    // `next`: the weights the step reads after this product, for the pool to warm
    // meanwhile (cpu::matmul_group); none keeps what the pool warms now.
    using Next = std::optional<std::span<const model::Matrix* const>>;
    void mm(const float* x, std::int64_t rows, const model::Matrix& w, float* y, Next next = std::nullopt) {
        cpu::matmul(x, rows, w, y, pool_, next);
        bytes_ += w.bytes();
    }
    void mm_group(const std::vector<cpu::MatJob>& jobs, Next next = std::nullopt) {
        cpu::matmul_group(jobs, pool_, next);
        for (const auto& j : jobs) bytes_ += j.w->bytes();
    }
    std::uint64_t bytes() const { return bytes_; }  // weight bytes read (each matrix once per use)
    PhaseTimes& times() { return times_; }
    const PhaseTimes& times() const { return times_; }

    using Clock = std::chrono::steady_clock;
    // Adds the seconds since `t` to `total` and restarts `t`.
    static void lap(Clock::time_point& t, double& total) {
        const auto now = Clock::now();
        total += std::chrono::duration<double>(now - t).count();
        t = now;
    }

private:
    cpu::ThreadPool& pool_;
    std::uint64_t bytes_ = 0;
    PhaseTimes times_;
};

}  // namespace inkling::forward
