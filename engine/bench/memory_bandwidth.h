// The yardstick for decode speed: how fast this machine streams memory it has not read
// recently, measured by the same binary in the same run as the model.
#pragma once

#include <cstddef>
#include <memory>

#include "engine/cpu/thread_pool.h"

namespace inkling::bench {

// Reads a `bytes`-sized buffer (far larger than the caches, on huge pages) with as many
// threads as `pool` has, each pinned to one of the process's CPUs and summing its slice
// with eight independent AVX-512 loads in flight (AVX2 or scalar where the CPU lacks it),
// `repeats` times; returns the median GB/s (1e9 bytes per second). This is the tuned read
// loop the decode kernels are held to: loops of 4-16 accumulators, with software prefetch or
// without, pinned or not, read the same within 3 % (docs/performance.md). A yardstick that
// reads low flatters every ratio taken against it; a pool-based AVX2 loop read 10-20 % below
// this one.
double measure_read_bandwidth(std::size_t bytes, int repeats, cpu::ThreadPool& pool);

// The same read loop kept ready — buffer touched, `threads` pinned readers waiting — so a
// benchmark can measure it right before and after each figure it divides by it:
//
//   ReadBandwidth probe(std::size_t{2} << 30, pool.size());
//   const double before = probe.measure(3);  … the kernel …  const double after = probe.measure(3);
class ReadBandwidth {
public:
    ReadBandwidth(std::size_t bytes, unsigned threads);
    ~ReadBandwidth();
    ReadBandwidth(const ReadBandwidth&) = delete;
    ReadBandwidth& operator=(const ReadBandwidth&) = delete;
    double measure(int repeats);  // median GB/s of `repeats` passes over the buffer

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace inkling::bench
