// The RAM cache of routed experts in front of an ExpertStore: `cap` slots per sparse
// layer, each holding one expert's record as read from `experts.inkx` (still quantized).
// Slots are reused least-recently-used first, except the pinned ones: at start each layer
// pins its `pins` most used experts according to the usage history (usage_history.h),
// loads them, and never evicts them.
//
// One compute thread drives it (the forward); reads run on a small I/O thread pool of
// their own, since they block on the disk:
//
//   ExpertCache cache(store, {.cap = 8, .usage_file = dir / "expert-usage.json"});
//   cache.prefetch(next_layer, predicted_ids);           // returns at once
//   std::size_t n = cache.round_size(layer, ids);        // ids sorted, all used this step
//   auto lease = cache.acquire(layer, ids.first(n));     // misses read in parallel
//   … compute with lease.ffn()[i] …                      // views valid until the lease ends
//   cache.record_use(layer, expert, rows); cache.end_step(tokens);
//
// docs/engine.md, "Expert cache", has the flags and the memory arithmetic.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/experts/expert_store.h"
#include "engine/experts/usage_history.h"
#include "engine/model/weights.h"

namespace inkling::experts {

struct CacheOptions {
    int cap = 0;                        // slots per sparse layer, 1..E (0: every expert)
    int pins = -1;                      // pinned experts per layer, < cap (-1: cap/2)
    int io_threads = 8;                 // concurrent reads (the disk's queue depth)
    std::filesystem::path usage_file;   // the usage history; empty: kept in memory only
    std::uint64_t save_every_tokens = 4096;  // also saved when the cache ends
    bool prefetch = true;
    // After the pins: fill the slots still empty in the background, each layer with the
    // experts its usage history ranks first (all of them when the cap is E), at most
    // max(1, io_threads / 4) reads at a time and only while no demand read or prefetch is
    // queued — so a cache that holds the model stops missing once it has been read, not
    // once every expert has been asked for. It never evicts.
    bool warm = false;
};

class ExpertCache {
public:
    // Loads the usage history, pins and reads each layer's pinned experts (in parallel).
    // Throws std::runtime_error when a pinned record cannot be read.
    ExpertCache(std::shared_ptr<ExpertStore> store, const CacheOptions& options);
    // Waits for reads in flight and saves the usage history (a failure is logged).
    ~ExpertCache();
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    // Experts of one layer held in slots until the lease ends.
    class Lease {
    public:
        Lease() = default;
        Lease(Lease&& o) noexcept { *this = std::move(o); }
        Lease& operator=(Lease&& o) noexcept;
        ~Lease() { release(); }
        const std::vector<model::Ffn>& ffn() const { return ffn_; }  // one per id, in order
        void release();

    private:
        friend class ExpertCache;
        ExpertCache* cache_ = nullptr;
        int layer_ = -1;  // position among the store's layers
        std::vector<int> slots_;
        std::vector<model::Ffn> ffn_;
    };

    // How many of `ids` (sorted, distinct) one acquire may take from the front: as many as
    // leave each unpinned one a slot that is not pinned. At least 1.
    std::size_t round_size(int layer, std::span<const int> ids) const;
    // The experts `ids` of model layer `layer` (at most round_size of them), reading the
    // missing ones in parallel. Throws std::runtime_error (a CRC or read error naming the
    // file, layer and expert); the cache stays usable.
    Lease acquire(int layer, std::span<const int> ids);
    // Starts reading `ids` (most wanted first) into free or evictable slots of `layer`
    // and returns at once; ids already present are skipped, and so are the ones no slot
    // is left for. Demand reads of acquire() overtake queued prefetches.
    void prefetch(int layer, std::span<const int> ids);

    // The usage history: rows routed to an expert; tokens through the model (decay, and a
    // save every save_every_tokens).
    void record_use(int layer, int expert, std::uint64_t rows);
    void end_step(std::uint64_t tokens);
    void save_history();
    const UsageHistory& history() const { return history_; }

    struct Counters {
        std::uint64_t hits = 0;        // experts found in a slot (or on their way from a prefetch)
        std::uint64_t misses = 0;      // experts acquire() had to read
        std::uint64_t prefetched = 0;  // reads prefetch() started
        std::uint64_t prefetch_hits = 0;  // hits owed to a prefetch (or to the warm-up)
        std::uint64_t warmed = 0;         // reads the warm-up started
        std::uint64_t bytes_read = 0;
        double read_s = 0, busy_s = 0;  // as ExpertStore::Counters
        double wait_s = 0;              // compute thread waiting in acquire()
        double hit_pct() const {
            return hits + misses ? 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses) : 100.0;
        }
    };
    Counters counters() const;

    int cap() const { return cap_; }
    int pins() const { return pins_; }            // per layer, as asked
    int pinned_total() const;                     // experts pinned over all layers
    bool resident(int layer, int expert) const;   // in a slot, read
    bool pinned(int layer, int expert) const;
    std::size_t slot_bytes() const;               // RAM of all slots
    bool prefetch_enabled() const { return options_.prefetch; }
    // Reads the warm-up still has queued or in flight (0 once it is done, or without one).
    std::size_t warm_pending() const;
    // Blocks until the warm-up is done (benchmarks: the "experts cached" figure).
    void wait_warm() const;
    const ExpertStore& store() const { return *store_; }
    const std::filesystem::path& usage_file() const { return options_.usage_file; }
    int io_threads() const { return options_.io_threads; }
    // One line for the start-up log.
    std::string describe() const;

private:
    enum class State { Empty, Loading, Ready, Failed };
    struct Slot {
        std::byte* buf = nullptr;
        int expert = -1;
        State state = State::Empty;
        bool pinned = false;
        bool lanes = false;        // its record in the lane order (packed as it was read)
        bool by_prefetch = false;  // read by a prefetch and not acquired since
        int refs = 0;
        std::uint64_t used = 0;
        std::string error;
    };
    struct Layer {
        int model_layer = 0;
        AlignedBuffer slab;
        std::vector<Slot> slots;
        std::vector<int> where;  // expert → slot, or -1
        int pinned = 0;
    };
    struct Job {
        int layer, slot, expert;
    };

    int victim(const Layer& l) const;  // a slot to (re)fill, or -1; mutex_ held
    void queue_warm();                  // mutex_ held
    // The next warm-up read, its slot claimed (Loading), or false when none is left to
    // start now; mutex_ held.
    bool next_warm(Job& job);
    // Points a slot at `expert`, Loading (the expert it held forgotten); mutex_ held.
    void claim(Layer& l, int slot, int expert, bool by_prefetch);
    void start_read(int layer, int slot, int expert, bool urgent);  // claim, then queue the read; mutex_ held
    void io_loop();
    void stop_io();  // lets queued reads finish, joins the I/O threads
    void release(Lease& lease);
    int slot_of(int model_layer) const;

    std::shared_ptr<ExpertStore> store_;
    CacheOptions options_;
    int cap_ = 0, pins_ = 0;
    UsageHistory history_;
    std::uint64_t tokens_since_save_ = 0;
    bool save_warned_ = false;

    mutable std::mutex mutex_;
    std::condition_variable changed_;  // a slot finished loading, or a job was queued
    std::vector<Layer> layers_;
    std::deque<Job> jobs_;
    std::deque<Job> warm_;  // slot -1: claimed when the read starts
    int warm_in_flight_ = 0, warm_limit_ = 1;
    mutable std::condition_variable warm_done_;
    bool stop_ = false;
    std::uint64_t clock_ = 0;
    Counters counts_;
    std::vector<std::thread> io_;
};

// What the command line says about the cache (`--cap`, `--ram-gb`, `--pin-experts`, `--usage-file`,
// `--warm-experts`).
struct CacheFlags {
    std::optional<int> cap;
    std::optional<double> ram_gb;
    std::optional<int> pins;
    std::optional<std::string> usage_file;  // "off": none
    std::string warm = "on";                // --warm-experts: on or off
};
// The cache a converted model runs with (null for a mapped model): cap from --cap, else
// --ram-gb, else default_cap; the usage file from --usage-file, else
// `<model dir>/expert-usage.json` when that folder is writable. Logs the start-up line.
// Throws std::runtime_error for flags out of range.
std::shared_ptr<ExpertCache> make_cache(const model::Model& model, const CacheFlags& flags);

// Slots per layer that `bytes` of RAM hold across the store's layers: in [1, E].
int cap_for_bytes(const ExpertStore& store, double bytes);
// The default: half of the memory available (platform::available_memory_bytes) once
// `dense_bytes` are counted off, in [1, E]; E when the OS does not say.
int default_cap(const ExpertStore& store, std::uint64_t dense_bytes);
// The dense weights default_cap counts off: their bytes when they are mapped (the page cache
// still counts them as available), none when they were copied in (--load-weights: already
// taken from what is available).
std::uint64_t dense_bytes_to_count(const model::Model& model);

}  // namespace inkling::experts
