#include "engine/bench/memory_bandwidth.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace inkling::bench {
namespace {

// A sum the compiler cannot drop, wide enough to keep the memory system busy.
__attribute__((target("avx2"))) std::uint64_t sum_avx2(const std::uint64_t* p, std::size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
        b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
        c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
        d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    alignas(32) std::uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a);
    std::uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; ++i) s += p[i];
    return s;
}

std::uint64_t sum_scalar(const std::uint64_t* p, std::size_t n) {
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < n; ++i) s += p[i];
    return s;
}

}  // namespace

double measure_read_bandwidth(std::size_t bytes, int repeats, cpu::ThreadPool& pool) {
    const std::size_t n = bytes / sizeof(std::uint64_t);
    std::unique_ptr<std::uint64_t[], decltype(&std::free)> buf(
        static_cast<std::uint64_t*>(std::aligned_alloc(64, n * sizeof(std::uint64_t))), &std::free);
    // Huge pages where the kernel offers them (THP in madvise mode): 4 KiB pages would
    // measure TLB misses as much as memory.
    madvise(buf.get(), n * sizeof(std::uint64_t), MADV_HUGEPAGE);
    // Touch every page from the threads that will read it.
    pool.parallel_for(static_cast<std::int64_t>(n), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) buf[i] = static_cast<std::uint64_t>(i);
    });
    const bool avx2 = __builtin_cpu_supports("avx2");
    std::vector<double> rates;
    std::atomic<std::uint64_t> sink{0};
    for (int r = 0; r < repeats; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(static_cast<std::int64_t>(n / 16), [&](std::int64_t b, std::int64_t e) {
            const std::uint64_t* p = buf.get() + b * 16;
            std::size_t len = static_cast<std::size_t>(e - b) * 16;
            std::uint64_t s = avx2 ? sum_avx2(p, len) : sum_scalar(p, len);
            sink.fetch_add(s, std::memory_order_relaxed);
        });
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rates.push_back(static_cast<double>(n / 16 * 16 * sizeof(std::uint64_t)) / s / 1e9);
    }
    if (sink.load() == 1) rates.push_back(0);  // keeps the sums observable
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
}

}  // namespace inkling::bench
