// The routed experts of a converted model, read record by record from `experts.inkx`
// (container_format.h) into buffers the caller owns — the expert cache's slots. Reads go
// around the page cache: O_DIRECT where the filesystem allows it, else a plain pread
// followed by posix_fadvise(DONTNEED), so streaming experts never evicts anything else.
//
//   auto store = experts::ExpertStore::open(dir / experts::kFileName);
//   store->check_config(config);                       // geometry agrees with config.json
//   auto buf = experts::aligned_buffer(store->record_bytes());
//   store->read(layer, expert, buf.get());             // thread-safe; CRC-checked once
//   model::Ffn f = store->view(buf.get());             // valid while buf holds the record
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/experts/container_format.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "platform/file_io.h"

namespace inkling::experts {

// Anonymous page-aligned memory (kAlign-aligned, as O_DIRECT wants), from the OS (platform/memory.h).
struct AlignedDeleter {
    std::size_t bytes = 0;
    void operator()(std::byte* p) const;
};
using AlignedBuffer = std::unique_ptr<std::byte[], AlignedDeleter>;
AlignedBuffer aligned_buffer(std::size_t bytes);

class ExpertStore {
public:
    // Validates the header (read_header) and opens the file for reading. Throws
    // std::runtime_error naming the file.
    static std::shared_ptr<ExpertStore> open(const std::filesystem::path& path);
    ~ExpertStore();
    ExpertStore(const ExpertStore&) = delete;
    ExpertStore& operator=(const ExpertStore&) = delete;

    // Throws std::runtime_error when hidden, expert width, expert count or the sparse
    // layers differ from `config`'s.
    void check_config(const model::Config& config) const;

    const ContainerHeader& header() const { return header_; }
    const RecordLayout& layout() const { return layout_; }
    const std::filesystem::path& path() const { return path_; }
    std::int64_t record_bytes() const { return header_.record_bytes; }
    std::int64_t experts() const { return header_.experts; }
    // Position of model layer `layer` among the container's layers, or -1.
    int layer_slot(int layer) const;
    bool direct_io() const { return direct_fd_ != platform::kNoFile; }

    // Reads record (layer, expert) into `buf` (record_bytes, kAlign-aligned). Safe from
    // several threads at once. The first read of each record checks its CRC; a mismatch
    // (or a short read) throws std::runtime_error naming the file, the layer and the expert.
    // `lanes` (with set_lane_order on): the record's int8 or int4 matrices then left in the
    // lane order (model/lane_order.h), after the CRC, which covers the record as stored.
    void read(int layer, int expert, std::byte* buf, bool lanes = false);
    // Whether reads may pack (the loader sets it where the kernels read the lane order: the
    // expert cache then asks for it on the records it keeps). Set before the first read.
    void set_lane_order(bool on) { lane_order_ = on; }
    bool lane_order() const { return lane_order_; }
    // The expert's three matrices inside a buffer `read` filled (`lanes`: as it asked).
    model::Ffn view(const std::byte* buf, bool lanes = false) const;

    struct Counters {
        std::uint64_t reads = 0, bytes = 0;
        double read_s = 0;  // summed over reads (parallel reads overlap)
        double busy_s = 0;  // wall time with at least one read in flight
    };
    Counters counters() const;

private:
    ExpertStore() = default;
    void read_at(std::int64_t offset, std::byte* buf, std::size_t bytes);
    void pack_lanes(std::byte* buf) const;  // set_lane_order

    std::filesystem::path path_;
    ContainerHeader header_;
    RecordLayout layout_;
    std::vector<std::uint32_t> crcs_;
    std::unique_ptr<std::atomic<bool>[]> verified_;
    platform::File fd_ = platform::kNoFile;         // buffered reads (and the fallback)
    platform::File direct_fd_ = platform::kNoFile;  // O_DIRECT, when the filesystem takes it
    std::atomic<std::uint64_t> reads_{0}, bytes_{0}, read_ns_{0};
    mutable std::mutex busy_mutex_;
    int in_flight_ = 0;
    std::chrono::steady_clock::time_point busy_since_;
    double busy_s_ = 0;
    bool lane_order_ = false;
};

// Sequential read rate of `path` in bytes/s: up to `limit` bytes in 8 MiB O_DIRECT reads
// (buffered + DONTNEED where O_DIRECT is refused), `streams` readers each through its own
// contiguous share (the cache reads with that many I/O threads, so the disk sees the same
// queue depth). The yardstick the benchmark sets the cache's achieved read rate against.
double sequential_read_rate(const std::filesystem::path& path, std::int64_t limit, int streams);

}  // namespace inkling::experts
