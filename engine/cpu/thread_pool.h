// A fixed pool of worker threads for data-parallel loops. The calling thread takes a
// share of the work too, so a pool of N threads runs N-way. A decode step issues
// hundreds of short loops, so waiting threads spin briefly before they sleep.
//
//   pool.parallel_for(rows, [&](std::int64_t begin, std::int64_t end) { … });
//
// A loop may also name memory that later loops will read (the next product's weights): the
// workers load it into their caches once the loop is over, while the caller runs what comes
// between (see parallel_for). A decode step's single-threaded stretches (norms, convs,
// routing) otherwise leave the memory idle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace inkling::cpu {

// Bytes for a thread to pull into its caches ahead of their use.
struct WarmRange {
    const std::byte* data;
    std::size_t bytes;
};

class ThreadPool {
public:
    // `threads` total ways of parallelism including the caller; 0 = hardware concurrency.
    explicit ThreadPool(unsigned threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Splits [0, n) into contiguous chunks, one per thread, and waits for all. `fn` must
    // not call parallel_for itself; one caller at a time.
    //
    // `warm`, when given, replaces the memory the workers warm: once the loop is over, the
    // workers load the ranges, in order and a 4 KiB piece at a time (taking turns at the
    // pieces), until the next loop starts, and resume where they left off after a loop
    // without `warm` (a decode step's attention sits between two products). The caller does
    // not warm: between loops it is the one with work to do. The ranges must stay readable
    // until a later loop replaces them; they are only read. Order them as the loop that
    // reads them will start: each thread's share's first bytes before anyone's later ones.
    void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn,
                      std::optional<std::span<const WarmRange>> warm = std::nullopt);

    // [begin, end) of [0, n) that thread `index` (0 = the caller) takes in parallel_for.
    std::pair<std::int64_t, std::int64_t> share(std::int64_t n, unsigned index) const;

    // Bytes the workers have warmed so far (a counter for tests and benchmarks).
    std::uint64_t warmed_bytes() const { return warmed_.load(std::memory_order_relaxed); }

private:
    // Where a thread stands in its copy of the warm list.
    struct Warmth {
        std::vector<WarmRange> ranges;
        std::size_t range = 0, offset = 0, first = 0, stride = 0;
        void reset(std::span<const WarmRange> r, unsigned worker, unsigned workers);
        bool pending() const { return range < ranges.size(); }
        // Loads this worker's pieces until `stop()` or the list's end; adds their bytes to
        // `counter`.
        template <class Stop>
        void run(Stop stop, std::atomic<std::uint64_t>& counter);
    };

    void worker(unsigned index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_, done_, caller_cv_;
    const std::function<void(std::int64_t, std::int64_t)>* job_ = nullptr;
    std::int64_t job_n_ = 0;
    std::optional<std::span<const WarmRange>> job_warm_;  // copied by each worker at its start
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<unsigned> pending_{0};
    std::atomic<std::uint64_t> caller_done_{0};  // the last loop whose caller chunk is done
    std::atomic<unsigned> done_waiters_{0};      // workers asleep until it is
    std::atomic<std::uint64_t> warmed_{0};
    std::atomic<bool> stop_{false};
};

}  // namespace inkling::cpu
