#include "engine/bench/expert_cache_bench.h"

#include <algorithm>
#include <cstdio>

namespace inkling::bench {

nlohmann::json expert_cache_figures(const experts::ExpertCache& cache, const experts::ExpertCache::Counters& before,
                                    int tokens, double seconds) {
    const auto now = cache.counters();
    const std::uint64_t hits = now.hits - before.hits, misses = now.misses - before.misses;
    const double bytes = static_cast<double>(now.bytes_read - before.bytes_read);
    const double busy = now.busy_s - before.busy_s;
    const double wait = now.wait_s - before.wait_s;
    const double n = std::max(tokens, 1);
    const double hit_pct = hits + misses ? 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses) : 100.0;
    const double achieved = busy > 0 ? bytes / busy : 0.0;
    // The yardstick: up to 2 GB of the container read front to back, now, by as many
    // readers as the cache has I/O threads.
    const double sequential =
        experts::sequential_read_rate(cache.store().path(), std::int64_t{2} << 30, cache.io_threads());
    nlohmann::json j = {{"cap", cache.cap()},
                        {"pinned", cache.pinned_total()},
                        {"format", experts::format_name(cache.store().header().format)},
                        {"direct_io", cache.store().direct_io()},
                        {"slot_bytes", cache.slot_bytes()},
                        {"hits", hits},
                        {"misses", misses},
                        {"hit_pct", hit_pct},
                        {"prefetched", now.prefetched - before.prefetched},
                        {"prefetch_hits", now.prefetch_hits - before.prefetch_hits},
                        {"disk_bytes_per_token", bytes / n},
                        {"wait_ms_per_token", wait * 1e3 / n},
                        {"read_busy_fraction", seconds > 0 ? busy / seconds : 0.0},
                        {"read_gb_s", achieved / 1e9},
                        {"sequential_gb_s", sequential / 1e9},
                        {"fraction_of_sequential", sequential > 0 ? achieved / sequential : 0.0}};
    std::fprintf(stderr,
                 "[bench] expert cache: cap %d, %d pinned, decode hit rate %.1f%%, %.1f MB/token from disk, read at "
                 "%.2f GB/s while reading = %.0f%% of the %.2f GB/s sequential rate; waited %.1f ms/token\n",
                 cache.cap(), cache.pinned_total(), hit_pct, bytes / n / 1e6, achieved / 1e9,
                 sequential > 0 ? 100.0 * achieved / sequential : 0.0, sequential / 1e9, wait * 1e3 / n);
    return j;
}

}  // namespace inkling::bench
