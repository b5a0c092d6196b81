#include "engine/bench/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include "engine/cpu/simd.h"
#endif
#include "platform/cpu_affinity.h"
#include "platform/memory.h"

namespace inkling::bench {
namespace {

// Sums the compiler cannot drop, with enough independent loads in flight to keep the
// memory system busy: eight 64-byte loads a step on AVX-512, four 32-byte ones on AVX2
// (elsewhere the plain loop, which the compiler vectorizes).
#if defined(__x86_64__)
__attribute__((target("avx512f"))) std::uint64_t sum_avx512(const std::uint64_t* p, std::size_t n) {
    __m512i a[8];
    for (auto& v : a) v = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64)
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) a[k] = _mm512_add_epi64(a[k], _mm512_load_si512(p + i + 8 * k));
    for (int k = 1; k < 8; ++k) a[0] = _mm512_add_epi64(a[0], a[k]);
    std::uint64_t s = static_cast<std::uint64_t>(_mm512_reduce_add_epi64(a[0]));
    for (; i < n; ++i) s += p[i];
    return s;
}

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

#endif

std::uint64_t sum_scalar(const std::uint64_t* p, std::size_t n) {
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < n; ++i) s += p[i];
    return s;
}

// The CPUs this process may run on, in order.
}  // namespace

struct ReadBandwidth::State {
    std::unique_ptr<std::uint64_t[], decltype(&platform::free_aligned)> buf{nullptr, &platform::free_aligned};
    std::size_t slice = 0;
    unsigned threads = 0;
    int repeats = 0;
    bool stop = false;
    std::barrier<> sync;
    std::atomic<std::uint64_t> sink{0};
    std::vector<std::thread> readers;
    explicit State(unsigned t) : threads(t), sync(static_cast<std::ptrdiff_t>(t) + 1) {}
};

ReadBandwidth::ReadBandwidth(std::size_t bytes, unsigned threads) : s_(std::make_unique<State>(threads)) {
    State& st = *s_;
    const std::size_t n = bytes / sizeof(std::uint64_t) / (64 * threads) * (64 * threads);
    const std::size_t huge = 2u << 20, alloc = (n * sizeof(std::uint64_t) + huge - 1) / huge * huge;
    st.buf.reset(static_cast<std::uint64_t*>(platform::allocate_aligned(huge, alloc)));
    // Huge pages where the kernel offers them (THP in madvise mode): 4 KiB pages would
    // measure TLB misses as much as memory.
    platform::advise_huge_pages(st.buf.get(), alloc);
    st.slice = n / threads;
#if defined(__x86_64__)
    const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
#endif
    const std::vector<int> cpus = platform::allowed_cpus();
    // Readers of their own pinned threads (not a pool's, which float): each first touches
    // and then reads its slice, all starting together each round.
    for (unsigned t = 0; t < threads; ++t)
#if defined(__x86_64__)
        st.readers.emplace_back([&st, t, avx512, avx2, cpus] {
#else
        st.readers.emplace_back([&st, t, cpus] {
#endif
            if (!cpus.empty()) platform::pin_this_thread(cpus[t % cpus.size()]);
            std::uint64_t* p = st.buf.get() + t * st.slice;
            for (std::size_t i = 0; i < st.slice; ++i) p[i] = i;
            st.sync.arrive_and_wait();
            while (true) {
                st.sync.arrive_and_wait();  // start (or stop)
                if (st.stop) return;
#if defined(__x86_64__)
                const std::uint64_t s = avx512 ? sum_avx512(p, st.slice) : avx2 ? sum_avx2(p, st.slice) : sum_scalar(p, st.slice);
#else
                const std::uint64_t s = sum_scalar(p, st.slice);
#endif
                st.sink.fetch_add(s, std::memory_order_relaxed);
                st.sync.arrive_and_wait();  // done
            }
        });
    st.sync.arrive_and_wait();  // touched
}

ReadBandwidth::~ReadBandwidth() {
    s_->stop = true;
    s_->sync.arrive_and_wait();
    for (auto& t : s_->readers) t.join();
}

double ReadBandwidth::measure(int repeats) {
    State& st = *s_;
    std::vector<double> rates;
    for (int r = 0; r < repeats; ++r) {
        st.sync.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        st.sync.arrive_and_wait();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rates.push_back(static_cast<double>(st.slice * st.threads * sizeof(std::uint64_t)) / s / 1e9);
    }
    if (st.sink.load() == 1) rates.push_back(0);  // keeps the sums observable
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
}

double measure_read_bandwidth(std::size_t bytes, int repeats, cpu::ThreadPool& pool) {
    return ReadBandwidth(bytes, pool.size()).measure(repeats);
}

}  // namespace inkling::bench
