// A fixed pool of worker threads for data-parallel loops. The calling thread takes a
// share of the work too, so a pool of N threads runs N-way. A decode step issues
// hundreds of short loops, so waiting threads spin briefly before they sleep.
//
//   pool.parallel_for(rows, [&](std::int64_t begin, std::int64_t end) { … });
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inkling::cpu {

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
    void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn);

private:
    void worker(unsigned index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    const std::function<void(std::int64_t, std::int64_t)>* job_ = nullptr;
    std::int64_t job_n_ = 0;
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<unsigned> pending_{0};
    std::atomic<bool> stop_{false};
};

}  // namespace inkling::cpu
