#include "engine/cpu/thread_pool.h"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace inkling::cpu {
namespace {

// The spin-wait hint: PAUSE on x86-64, YIELD on ARM64.
inline void spin_pause() {
#if defined(__x86_64__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// How long a thread polls before it sleeps: longer than the gaps between two loops of one
// decode step (the longest is a layer's single-threaded work, ~0.1 ms on a small model),
// short enough that an idle engine sleeps at once. Timed, not counted: PAUSE takes 10 ns
// on some Intel cores and 40 on others, and a sleeping worker woken through the kernel
// starts 20-50 µs late in a VM.
constexpr auto kSpin = std::chrono::microseconds(250);

// Polls `done` (PAUSE between polls) for at most kSpin; whether it came true.
template <class Done>
bool spin_until(Done done) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (true) {
        for (int i = 0; i < 32; ++i) {
            if (done()) return true;
            spin_pause();
        }
        if (std::chrono::steady_clock::now() >= until) return done();
    }
}

std::pair<std::int64_t, std::int64_t> share(std::int64_t n, unsigned ways, unsigned index) {
    std::int64_t chunk = n / ways, extra = n % ways;
    std::int64_t begin = index * chunk + std::min<std::int64_t>(index, extra);
    return {begin, begin + chunk + (static_cast<std::int64_t>(index) < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
    if (n <= 0) return;
    if (workers_.empty() || n == 1) {
        fn(0, n);
        return;
    }
    job_ = &fn;
    job_n_ = n;
    pending_.store(static_cast<unsigned>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    {
        std::lock_guard lock(mutex_);  // orders the wake-up after a sleeper's check
    }
    wake_.notify_all();
    auto [b, e] = share(n, size(), 0);
    if (b < e) fn(b, e);
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    job_ = nullptr;
}

void ThreadPool::worker(unsigned index) {
    std::uint64_t seen = 0;
    while (true) {
        if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen || stop_; })) {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
        }
        if (stop_) return;
        seen = generation_.load(std::memory_order_acquire);
        auto [b, e] = share(job_n_, size(), index);
        if (b < e) (*job_)(b, e);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard lock(mutex_);
            done_.notify_one();
        }
    }
}

}  // namespace inkling::cpu
