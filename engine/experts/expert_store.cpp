#include "engine/experts/expert_store.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/lane_order.h"
#include "platform/file_io.h"
#include "platform/memory.h"

namespace inkling::experts {
namespace {

using Clock = std::chrono::steady_clock;

std::string hex32(std::uint32_t v) {
    char b[16];
    std::snprintf(b, sizeof b, "%08x", v);
    return b;
}

// An unbuffered (O_DIRECT) file for `path` if the filesystem accepts both the open and an
// aligned read (tmpfs refuses the open; some filesystems only the read), else kNoFile.
platform::File open_direct(const std::filesystem::path& path) {
    const platform::File fd = platform::open_file(path, platform::Open::ReadUnbuffered);
    if (fd == platform::kNoFile) return platform::kNoFile;
    AlignedBuffer probe = aligned_buffer(kAlign);
    std::string err;
    if (!platform::read_all_at(fd, probe.get(), kAlign, 0, err)) {
        platform::close_file(fd);
        return platform::kNoFile;
    }
    return fd;
}

}  // namespace

void AlignedDeleter::operator()(std::byte* p) const {
    platform::free_pages(p, bytes);
}

AlignedBuffer aligned_buffer(std::size_t bytes) {
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    std::byte* p = platform::allocate_pages(size);
    if (!p)
        throw std::runtime_error("cannot map " + std::to_string(size) + " bytes for expert slots: out of memory");
    return AlignedBuffer(p, AlignedDeleter{size});
}

std::shared_ptr<ExpertStore> ExpertStore::open(const std::filesystem::path& path) {
    ParsedHeader parsed = read_header(path);
    std::shared_ptr<ExpertStore> s(new ExpertStore());
    s->path_ = path;
    s->header_ = std::move(parsed.header);
    s->crcs_ = std::move(parsed.crcs);
    s->layout_ = record_layout(s->header_.format, s->header_.format == Format::Int8 ? 32 : s->header_.group,
                               s->header_.hidden, s->header_.inter);
    s->verified_ = std::make_unique<std::atomic<bool>[]>(s->crcs_.size());
    s->fd_ = platform::open_file(path, platform::Open::Read);
    if (s->fd_ == platform::kNoFile) throw std::runtime_error(path.string() + ": cannot open: " + platform::last_error());
    s->direct_fd_ = open_direct(path);
    return s;
}

ExpertStore::~ExpertStore() {
    platform::close_file(fd_);
    platform::close_file(direct_fd_);
}

void ExpertStore::check_config(const model::Config& c) const {
    std::vector<int> sparse;
    for (int i = 0; i < c.layers; ++i)
        if (c.kinds[i].sparse) sparse.push_back(i);
    auto mismatch = [&](const std::string& what, const std::string& have, const std::string& want) {
        throw std::runtime_error(path_.string() + ": " + what + " is " + have + " in the container but " + want +
                                 " in config.json (converted from another model?)");
    };
    if (header_.hidden != c.hidden) mismatch("hidden", std::to_string(header_.hidden), std::to_string(c.hidden));
    if (header_.inter != c.moe_inter)
        mismatch("the expert width", std::to_string(header_.inter), std::to_string(c.moe_inter));
    if (header_.experts != c.experts)
        mismatch("the expert count", std::to_string(header_.experts), std::to_string(c.experts));
    if (header_.layers != sparse) {
        auto text = [](const std::vector<int>& v) {
            std::string t = "[";
            for (std::size_t i = 0; i < v.size(); ++i) t += (i ? "," : "") + std::to_string(v[i]);
            return t + "]";
        };
        mismatch("the sparse layer list", text(header_.layers), text(sparse));
    }
}

int ExpertStore::layer_slot(int layer) const {
    for (std::size_t i = 0; i < header_.layers.size(); ++i)
        if (header_.layers[i] == layer) return static_cast<int>(i);
    return -1;
}

void ExpertStore::read_at(std::int64_t offset, std::byte* buf, std::size_t bytes) {
    std::string err;
    if (direct_fd_ != platform::kNoFile && platform::read_all_at(direct_fd_, buf, bytes, offset, err)) return;
    if (!platform::read_all_at(fd_, buf, bytes, offset, err))
        throw std::runtime_error(path_.string() + ": read of " + std::to_string(bytes) + " bytes at " +
                                 std::to_string(offset) + " failed: " +
                                 (!err.empty() ? err : "unexpected end of file"));
    platform::drop_cached(fd_, offset, static_cast<std::int64_t>(bytes));
}

void ExpertStore::read(int layer, int expert, std::byte* buf, bool lanes) {
    const int slot = layer_slot(layer);
    if (slot < 0 || expert < 0 || expert >= header_.experts)
        throw std::runtime_error(path_.string() + ": no record for layer " + std::to_string(layer) + ", expert " +
                                 std::to_string(expert));
    const std::int64_t index = static_cast<std::int64_t>(slot) * header_.experts + expert;
    const auto bytes = static_cast<std::size_t>(header_.record_bytes);
    const auto t0 = Clock::now();
    {
        std::lock_guard lock(busy_mutex_);
        if (in_flight_++ == 0) busy_since_ = t0;
    }
    try {
        read_at(header_.record_offset(index), buf, bytes);
    } catch (...) {
        std::lock_guard lock(busy_mutex_);
        if (--in_flight_ == 0) busy_s_ += std::chrono::duration<double>(Clock::now() - busy_since_).count();
        throw;
    }
    const auto t1 = Clock::now();
    {
        std::lock_guard lock(busy_mutex_);
        if (--in_flight_ == 0) busy_s_ += std::chrono::duration<double>(t1 - busy_since_).count();
    }
    reads_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    read_ns_.fetch_add(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()),
                       std::memory_order_relaxed);
    if (!verified_[index].load(std::memory_order_acquire)) {
        const std::uint32_t got = crc32(buf, bytes);
        if (got != crcs_[index])
            throw std::runtime_error(path_.string() + ": CRC mismatch in the record of layer " + std::to_string(layer) +
                                     ", expert " + std::to_string(expert) + " (table " + hex32(crcs_[index]) +
                                     ", read " + hex32(got) + "): the container is damaged; convert the model again");
        verified_[index].store(true, std::memory_order_release);
    }
    if (lanes && lane_order_) pack_lanes(buf);
}

void ExpertStore::pack_lanes(std::byte* buf) const {
    const model::DType t = layout_.format == Format::Int8 ? model::DType::I8 : model::DType::Q4;
    for (const MatrixSection* s : {&layout_.gate, &layout_.up, &layout_.down})
        model::pack_lanes(t, buf + s->data_at, s->rows, s->cols, static_cast<std::int64_t>(model::dtype_bytes(t, s->padded)));
}

model::Ffn ExpertStore::view(const std::byte* buf, bool lanes) const {
    model::Ffn f{section_view(layout_, layout_.gate, buf), section_view(layout_, layout_.up, buf),
                 section_view(layout_, layout_.down, buf)};
    f.gate.lane_packed = f.up.lane_packed = f.down.lane_packed = lanes && lane_order_;
    return f;
}

ExpertStore::Counters ExpertStore::counters() const {
    Counters c;
    c.reads = reads_.load(std::memory_order_relaxed);
    c.bytes = bytes_.load(std::memory_order_relaxed);
    c.read_s = static_cast<double>(read_ns_.load(std::memory_order_relaxed)) * 1e-9;
    std::lock_guard lock(busy_mutex_);
    c.busy_s = busy_s_;
    if (in_flight_ > 0) c.busy_s += std::chrono::duration<double>(Clock::now() - busy_since_).count();
    return c;
}

double sequential_read_rate(const std::filesystem::path& path, std::int64_t limit, int streams) {
    const auto size = static_cast<std::int64_t>(std::filesystem::file_size(path));
    constexpr std::int64_t kBlock = std::int64_t{8} << 20;
    const std::int64_t total = std::min(size, limit) / kAlign * kAlign;
    streams = std::max(1, streams);
    // `streams` readers, each through its own contiguous share in 8 MiB reads: the disk's
    // sequential rate at the queue depth the cache's I/O threads give it.
    const std::int64_t share = (total / streams + kAlign - 1) / kAlign * kAlign;
    std::vector<std::int64_t> done(static_cast<std::size_t>(streams), 0);
    std::vector<std::thread> readers;
    std::string failure;
    std::mutex failure_mutex;
    const auto t0 = Clock::now();
    for (int k = 0; k < streams; ++k)
        readers.emplace_back([&, k] {
            platform::File fd = open_direct(path);
            const bool direct = fd != platform::kNoFile;
            if (!direct) fd = platform::open_file(path, platform::Open::Read);
            if (fd == platform::kNoFile) {
                std::lock_guard lock(failure_mutex);
                failure = path.string() + ": cannot open: " + platform::last_error();
                return;
            }
            AlignedBuffer buf = aligned_buffer(kBlock);
            const std::int64_t from = k * share, to = std::min(total, from + share);
            std::string err;
            for (std::int64_t at = from; at < to;) {
                const std::int64_t n = std::min(kBlock, to - at);
                if (!platform::read_all_at(fd, buf.get(), static_cast<std::size_t>(n), at, err)) break;
                if (!direct) platform::drop_cached(fd, at, n);
                at += n;
                done[static_cast<std::size_t>(k)] += n;
            }
            platform::close_file(fd);
        });
    for (auto& t : readers) t.join();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!failure.empty()) throw std::runtime_error(failure);
    std::int64_t bytes = 0;
    for (auto d : done) bytes += d;
    return bytes > 0 && secs > 0 ? static_cast<double>(bytes) / secs : 0.0;
}

}  // namespace inkling::experts
