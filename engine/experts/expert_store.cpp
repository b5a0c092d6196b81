#include "engine/experts/expert_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace inkling::experts {
namespace {

using Clock = std::chrono::steady_clock;

std::string hex32(std::uint32_t v) {
    char b[16];
    std::snprintf(b, sizeof b, "%08x", v);
    return b;
}

// Reads exactly `bytes` at `offset` (pread may return less); false on an error or EOF.
bool pread_all(int fd, std::byte* buf, std::size_t bytes, std::int64_t offset, int& err) {
    std::size_t done = 0;
    while (done < bytes) {
        const ssize_t n = ::pread(fd, buf + done, bytes - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n < 0 ? errno : 0;
            return false;
        }
        done += static_cast<std::size_t>(n);
    }
    return true;
}

// An O_DIRECT descriptor for `path` if the filesystem accepts both the open and an aligned
// read (tmpfs refuses the open; some filesystems only the read), else -1.
int open_direct(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return -1;
    AlignedBuffer probe = aligned_buffer(kAlign);
    int err = 0;
    if (!pread_all(fd, probe.get(), kAlign, 0, err)) {
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

void AlignedDeleter::operator()(std::byte* p) const {
    if (p) ::munmap(p, bytes);
}

AlignedBuffer aligned_buffer(std::size_t bytes) {
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw std::runtime_error("cannot map " + std::to_string(size) + " bytes for expert slots: " +
                                 std::strerror(errno));
    return AlignedBuffer(static_cast<std::byte*>(p), AlignedDeleter{size});
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
    s->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (s->fd_ < 0) throw std::runtime_error(path.string() + ": cannot open: " + std::strerror(errno));
    s->direct_fd_ = open_direct(path);
    return s;
}

ExpertStore::~ExpertStore() {
    if (fd_ >= 0) ::close(fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
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
    int err = 0;
    if (direct_fd_ >= 0 && pread_all(direct_fd_, buf, bytes, offset, err)) return;
    if (!pread_all(fd_, buf, bytes, offset, err))
        throw std::runtime_error(path_.string() + ": read of " + std::to_string(bytes) + " bytes at " +
                                 std::to_string(offset) + " failed: " +
                                 (err ? std::strerror(err) : "unexpected end of file"));
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

void ExpertStore::read(int layer, int expert, std::byte* buf) {
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
    if (verified_[index].load(std::memory_order_acquire)) return;
    const std::uint32_t got = crc32(buf, bytes);
    if (got != crcs_[index])
        throw std::runtime_error(path_.string() + ": CRC mismatch in the record of layer " + std::to_string(layer) +
                                 ", expert " + std::to_string(expert) + " (table " + hex32(crcs_[index]) + ", read " +
                                 hex32(got) + "): the container is damaged; convert the model again");
    verified_[index].store(true, std::memory_order_release);
}

model::Ffn ExpertStore::view(const std::byte* buf) const {
    return {section_view(layout_, layout_.gate, buf), section_view(layout_, layout_.up, buf),
            section_view(layout_, layout_.down, buf)};
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
            int fd = open_direct(path);
            const bool direct = fd >= 0;
            if (!direct) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                std::lock_guard lock(failure_mutex);
                failure = path.string() + ": cannot open: " + std::strerror(errno);
                return;
            }
            AlignedBuffer buf = aligned_buffer(kBlock);
            const std::int64_t from = k * share, to = std::min(total, from + share);
            int err = 0;
            for (std::int64_t at = from; at < to;) {
                const std::int64_t n = std::min(kBlock, to - at);
                if (!pread_all(fd, buf.get(), static_cast<std::size_t>(n), at, err)) break;
                if (!direct) ::posix_fadvise(fd, static_cast<off_t>(at), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
                at += n;
                done[static_cast<std::size_t>(k)] += n;
            }
            ::close(fd);
        });
    for (auto& t : readers) t.join();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!failure.empty()) throw std::runtime_error(failure);
    std::int64_t bytes = 0;
    for (auto d : done) bytes += d;
    return bytes > 0 && secs > 0 ? static_cast<double>(bytes) / secs : 0.0;
}

}  // namespace inkling::experts
