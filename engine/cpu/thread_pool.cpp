#include "engine/cpu/thread_pool.h"

namespace inkling::cpu {

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

namespace {
std::pair<std::int64_t, std::int64_t> share(std::int64_t n, unsigned ways, unsigned index) {
    std::int64_t chunk = n / ways, extra = n % ways;
    std::int64_t begin = index * chunk + std::min<std::int64_t>(index, extra);
    return {begin, begin + chunk + (static_cast<std::int64_t>(index) < extra ? 1 : 0)};
}
}  // namespace

void ThreadPool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
    if (n <= 0) return;
    if (workers_.empty() || n == 1) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        job_ = &fn;
        job_n_ = n;
        pending_ = static_cast<unsigned>(workers_.size());
        ++generation_;
    }
    wake_.notify_all();
    auto [b, e] = share(n, size(), 0);
    if (b < e) fn(b, e);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker(unsigned index) {
    std::uint64_t seen = 0;
    while (true) {
        const std::function<void(std::int64_t, std::int64_t)>* job;
        std::int64_t n;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
            n = job_n_;
        }
        auto [b, e] = share(n, size(), index);
        if (b < e) (*job)(b, e);
        {
            std::lock_guard lock(mutex_);
            if (--pending_ == 0) done_.notify_one();
        }
    }
}

}  // namespace inkling::cpu
