// The thread pool's loops and its warm lists (memory the workers load between loops), and
// the warm lists cpu::matmul_group builds for the product that follows.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/thread_pool.h"

using namespace inkling;

namespace {

// Waits (up to 10 s) until the pool has warmed `bytes`; what it has warmed then.
std::uint64_t wait_warmed(const cpu::ThreadPool& pool, std::uint64_t bytes) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pool.warmed_bytes() < bytes && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // anything past it shows too
    return pool.warmed_bytes();
}

void nothing(std::int64_t, std::int64_t) {}

}  // namespace

TEST_CASE("parallel_for covers every index once, its chunks as share() gives them") {
    for (unsigned threads : {1u, 2u, 3u, 5u}) {
        cpu::ThreadPool pool(threads);
        for (std::int64_t n : {1, 2, 7, 1000}) {
            std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
            std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
            std::mutex m;
            pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
                for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
                std::lock_guard lock(m);
                chunks.emplace_back(b, e);
            });
            for (auto& h : hits) CHECK(h.load() == 1);
            std::int64_t covered = 0;
            for (unsigned t = 0; t < pool.size(); ++t) {
                const auto [b, e] = pool.share(n, t);
                CHECK(b == covered);
                covered = e;
                if (b < e && n > 1 && threads > 1)
                    CHECK(std::find(chunks.begin(), chunks.end(), std::make_pair(b, e)) != chunks.end());
            }
            CHECK(covered == n);
        }
    }
}

TEST_CASE("the workers warm every byte of a list once, whatever their number") {
    std::vector<std::byte> buf(3 << 20, std::byte{1});
    // Ranges of odd sizes and alignments, one shorter than a piece, one empty.
    const std::vector<cpu::WarmRange> list = {
        {buf.data() + 3, 10'001}, {buf.data() + 20'000, 1}, {buf.data() + 30'000, 0}, {buf.data() + 40'000, 2'500'017}};
    std::uint64_t total = 0;
    for (const auto& r : list) total += r.bytes;
    for (unsigned threads : {2u, 3u, 5u}) {
        cpu::ThreadPool pool(threads);
        pool.parallel_for(64, nothing, std::span<const cpu::WarmRange>(list));
        CHECK(wait_warmed(pool, total) == total);
        // A loop without a list leaves the finished one finished (nothing warmed twice).
        pool.parallel_for(64, nothing);
        CHECK(wait_warmed(pool, total) == total);
    }
}

TEST_CASE("a loop without a list keeps the workers' progress; a new list replaces it") {
    std::vector<std::byte> buf(std::size_t{48} << 20, std::byte{1});
    const std::vector<cpu::WarmRange> big = {{buf.data(), buf.size()}};
    cpu::ThreadPool pool(3);
    // Loops without a list right after a long one: the workers resume where they were,
    // so in the end every byte is warmed exactly once.
    pool.parallel_for(8, nothing, std::span<const cpu::WarmRange>(big));
    for (int i = 0; i < 5; ++i) pool.parallel_for(8, nothing);
    CHECK(wait_warmed(pool, buf.size()) == buf.size());

    // An empty list stops the warming: once the loop that carried it has returned, the
    // workers have counted what they did of the old list and add nothing more.
    const std::uint64_t before = pool.warmed_bytes();
    pool.parallel_for(8, nothing, std::span<const cpu::WarmRange>(big));
    pool.parallel_for(8, nothing, std::span<const cpu::WarmRange>());
    const std::uint64_t stopped = pool.warmed_bytes();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(pool.warmed_bytes() == stopped);
    CHECK(stopped - before <= buf.size());
}

TEST_CASE("back-to-back loops with warm lists, the caller's chunks shorter or longer, never stall") {
    // A worker that waits for the caller to finish its chunk before warming must also let
    // the caller finish the next loop's chunk first (it once waited for exactly the loop it
    // had seen, which the caller could already be past: both then waited for each other).
    std::vector<std::byte> buf(1 << 20, std::byte{1});
    const std::vector<cpu::WarmRange> list = {{buf.data(), buf.size()}};
    for (unsigned threads : {2u, 3u}) {
        cpu::ThreadPool pool(threads);
        std::atomic<std::int64_t> sum{0};
        for (int i = 0; i < 3000; ++i) {
            const bool caller_slow = i % 3 == 0;
            pool.parallel_for(
                threads,
                [&](std::int64_t b, std::int64_t e) {
                    // Spin a little in one side's chunk so either side can finish first.
                    const bool caller = b == 0;
                    if (caller == caller_slow) {
                        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
                        while (std::chrono::steady_clock::now() < until) {}
                    }
                    sum += e - b;
                },
                i % 2 ? std::optional<std::span<const cpu::WarmRange>>(list) : std::nullopt);
        }
        CHECK(sum.load() == 3000 * static_cast<std::int64_t>(threads));
    }
}

TEST_CASE("matmul_group's warm list: each thread's future rows, in turns, at most kWarmBytes") {
    // Two bf16 products of 1,000 × 1,024 and 600 × 1,024 (2 KiB rows): 3.3 MB in all.
    std::vector<std::byte> a(std::size_t{1000} * 2048), b(std::size_t{600} * 2048);
    const model::Matrix wa{a.data(), model::DType::BF16, 1000, 1024, 1024};
    const model::Matrix wb{b.data(), model::DType::BF16, 600, 1024, 1024};
    const model::Matrix* next[] = {&wa, &wb};
    for (unsigned threads : {1u, 2u, 4u}) {
        cpu::ThreadPool pool(threads);
        const std::vector<cpu::WarmRange> list = cpu::warm_ranges(next, pool);
        std::uint64_t total = 0, twice = 0;
        std::vector<char> seen_a(a.size(), 0), seen_b(b.size(), 0);
        for (const auto& r : list) {
            total += r.bytes;
            const bool in_a = r.data >= a.data() && r.data + r.bytes <= a.data() + a.size();
            const bool in_b = r.data >= b.data() && r.data + r.bytes <= b.data() + b.size();
            REQUIRE((in_a || in_b));
            std::vector<char>& seen = in_a ? seen_a : seen_b;
            const std::size_t at = static_cast<std::size_t>(r.data - (in_a ? a.data() : b.data()));
            for (std::size_t i = at; i < at + r.bytes; ++i) twice += seen[i]++ != 0;
        }
        CHECK(twice == 0);
        CHECK(total == std::min<std::uint64_t>(cpu::kWarmBytes, a.size() + b.size()));
        // Each thread's share (by rows: all rows read alike) starts warm.
        const std::int64_t units_per_row = 2048 / 64, units = 1600 * units_per_row;
        for (unsigned t = 0; t < pool.size(); ++t) {
            const std::int64_t row = pool.share(units, t).first / units_per_row;
            const bool warm = row < 1000 ? seen_a[static_cast<std::size_t>(row) * 2048]
                                         : seen_b[static_cast<std::size_t>(row - 1000) * 2048];
            CHECK(warm);
        }
    }
}

TEST_CASE("a product that warms the next one gives the same bits, and the next one is warmed") {
    std::vector<std::uint16_t> wbits(std::size_t{512} * 256), nbits(std::size_t{256} * 512);
    for (std::size_t i = 0; i < wbits.size(); ++i) wbits[i] = static_cast<std::uint16_t>(0x3f00 + (i * 37) % 255);
    for (std::size_t i = 0; i < nbits.size(); ++i) nbits[i] = static_cast<std::uint16_t>(0xbf00 + (i * 11) % 255);
    const model::Matrix w{reinterpret_cast<const std::byte*>(wbits.data()), model::DType::BF16, 512, 256, 256};
    const model::Matrix n{reinterpret_cast<const std::byte*>(nbits.data()), model::DType::BF16, 256, 512, 512};
    std::vector<float> x(256 * 3);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;
    cpu::ThreadPool pool(2);
    std::vector<float> plain(512 * 3), warmed(512 * 3);
    const cpu::MatJob plain_job{x.data(), 3, &w, plain.data()}, warm_job{x.data(), 3, &w, warmed.data()};
    cpu::matmul_group(std::span(&plain_job, 1), pool);
    const model::Matrix* next = &n;
    cpu::matmul_group(std::span(&warm_job, 1), pool, std::span(&next, 1));
    CHECK(std::memcmp(plain.data(), warmed.data(), plain.size() * sizeof(float)) == 0);
    CHECK(wait_warmed(pool, n.bytes()) == n.bytes());
}
