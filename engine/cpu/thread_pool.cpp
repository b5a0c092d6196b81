#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>

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

std::pair<std::int64_t, std::int64_t> chunk_of(std::int64_t n, unsigned ways, unsigned index) {
    std::int64_t chunk = n / ways, extra = n % ways;
    std::int64_t begin = index * chunk + std::min<std::int64_t>(index, extra);
    return {begin, begin + chunk + (static_cast<std::int64_t>(index) < extra ? 1 : 0)};
}

// Warming loads one word a cache line, a piece at a time between checks for the next loop
// (4 KiB from memory take ~0.1-0.2 µs on one core: the next loop waits no longer than that).
constexpr std::size_t kWarmPiece = 4096, kLine = 64;

// Keeps the warming loads from being optimised away.
std::atomic<std::uint64_t> g_warm_sink{0};

std::uint64_t load_lines(const std::byte* p, std::size_t bytes) {
    std::uint64_t a = 0, b = 0;
    std::size_t i = 0;
    for (; i + 2 * kLine <= bytes; i += 2 * kLine) {
        std::uint64_t u, v;
        std::memcpy(&u, p + i, sizeof u);
        std::memcpy(&v, p + i + kLine, sizeof v);
        a += u;
        b += v;
    }
    for (; i < bytes; i += kLine) {
        std::uint64_t u = 0;
        std::memcpy(&u, p + i, std::min<std::size_t>(sizeof u, bytes - i));
        a += u;
    }
    return a + b;
}

}  // namespace

void ThreadPool::Warmth::reset(std::span<const WarmRange> r, unsigned worker, unsigned workers) {
    ranges.assign(r.begin(), r.end());
    range = 0;
    first = offset = (worker - 1) * kWarmPiece;
    stride = workers * kWarmPiece;
}

// Pieces worker, worker + workers, … of the list (pieces counted from each range's start),
// so that the workers share it without two loading the same piece.
template <class Stop>
void ThreadPool::Warmth::run(Stop stop, std::atomic<std::uint64_t>& counter) {
    std::uint64_t sum = 0, bytes = 0;
    while (range < ranges.size() && !stop()) {
        const WarmRange& r = ranges[range];
        if (offset >= r.bytes) {
            ++range, offset = first;
            continue;
        }
        const std::size_t n = std::min(kWarmPiece, r.bytes - offset);
        sum += load_lines(r.data + offset, n);
        bytes += n;
        offset += stride;
    }
    if (bytes == 0) return;
    g_warm_sink.store(sum, std::memory_order_relaxed);
    counter.fetch_add(bytes, std::memory_order_relaxed);
}

std::pair<std::int64_t, std::int64_t> ThreadPool::share(std::int64_t n, unsigned index) const {
    return chunk_of(n, size(), index);
}

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

void ThreadPool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn,
                              std::optional<std::span<const WarmRange>> warm) {
    if (n <= 0) return;
    if (workers_.empty() || (n == 1 && !warm)) {
        // A pool of one has nobody to warm anything; a one-chunk loop without a new list
        // leaves the workers' lists as they are.
        fn(0, n);
        return;
    }
    job_ = &fn;
    job_n_ = n;
    job_warm_ = warm;
    pending_.store(static_cast<unsigned>(workers_.size()), std::memory_order_relaxed);
    const std::uint64_t generation = generation_.fetch_add(1, std::memory_order_release) + 1;
    {
        std::lock_guard lock(mutex_);  // orders the wake-up after a sleeper's check
    }
    wake_.notify_all();
    auto [b, e] = chunk_of(n, size(), 0);
    if (b < e) fn(b, e);
    caller_done_.store(generation);
    if (done_waiters_.load() > 0) {
        std::lock_guard lock(mutex_);
        caller_cv_.notify_all();
    }
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    job_ = nullptr;
}

void ThreadPool::worker(unsigned index) {
    std::uint64_t seen = 0;
    Warmth warmth;
    while (true) {
        if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen || stop_; })) {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
        }
        if (stop_) return;
        seen = generation_.load(std::memory_order_acquire);
        // The caller rewrites the list only after every worker has counted itself done.
        if (job_warm_) warmth.reset(*job_warm_, index, size() - 1);
        auto [b, e] = chunk_of(job_n_, size(), index);
        if (b < e) (*job_)(b, e);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard lock(mutex_);
            done_.notify_one();
        }
        // Warming starts when the loop is over (the caller done with its chunk too): while
        // it runs, its own reads keep the memory busy, and a worker warming beside a slower
        // caller only slows the caller's share. Past the spin, the worker sleeps until the
        // caller is done (the caller wakes it when it sees one registered: the two sides'
        // seq_cst store-then-load order means one of them sees the other).
        if (warmth.pending()) {
            // At or past: the caller may already be through its chunk of the next loop.
            auto caller_done = [&] { return caller_done_.load() >= seen; };
            if (!spin_until(caller_done)) {
                ++done_waiters_;
                std::unique_lock lock(mutex_);
                caller_cv_.wait(lock, caller_done);
                --done_waiters_;
            }
            warmth.run([&] { return generation_.load(std::memory_order_acquire) != seen || stop_; }, warmed_);
        }
    }
}

}  // namespace inkling::cpu
