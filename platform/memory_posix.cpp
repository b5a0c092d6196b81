#include "platform/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "platform/file_io.h"

namespace inkling::platform {

std::size_t page_size() {
    static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return page;
}

MappedFile::MappedFile(const std::filesystem::path& path, FileBacking backing) : path_(path.string()) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(path_ + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        throw std::runtime_error(path_ + ": cannot stat");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0 && backing == FileBacking::Copy) {
        try {
            copy_in(fd);
        } catch (...) {
            ::close(fd);
            throw;
        }
    } else if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
        const int err = errno;
        if (p == MAP_FAILED) {
            ::close(fd);
            throw std::runtime_error(path_ + ": mmap failed: " + std::strerror(err));
        }
        data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file
}

void MappedFile::copy_in(std::intptr_t handle) {
    // Whole 2 MiB pages at a 2 MiB boundary (the slack around an aligned start unmapped), so
    // that THP can back all of it.
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const std::size_t bytes = (size_ + kHuge - 1) / kHuge * kHuge;
    void* raw = ::mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        throw std::runtime_error(path_ + ": cannot allocate " + std::to_string(bytes) +
                                 " bytes to copy it into: " + std::strerror(errno));
    const auto base = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t start = (base + kHuge - 1) / kHuge * kHuge;
    if (start > base) ::munmap(raw, start - base);
    if (base + kHuge > start) ::munmap(reinterpret_cast<void*>(start + bytes), base + kHuge - start);
    auto* p = reinterpret_cast<std::byte*>(start);
    ::madvise(p, bytes, MADV_HUGEPAGE);
    std::string err;
    if (!read_all_at(handle, p, size_, 0, err)) {
        ::munmap(p, bytes);
        throw std::runtime_error(path_ + ": reading its " + std::to_string(size_) +
                                 " bytes failed: " + (err.empty() ? "unexpected end" : err));
    }
    ::mprotect(p, bytes, PROT_READ);  // as read-only as the mapping it stands for
    data_ = p;
    allocated_ = bytes;
    copied_ = true;
}

bool MappedFile::rewrite(const std::function<void(std::byte*)>& edit) {
    if (!copied_) return false;
    auto* p = const_cast<std::byte*>(data_);
    if (::mprotect(p, allocated_, PROT_READ | PROT_WRITE) != 0)
        throw std::runtime_error(path_ + ": cannot make its copy writable: " + std::strerror(errno));
    try {
        edit(p);
    } catch (...) {
        ::mprotect(p, allocated_, PROT_READ);
        throw;
    }
    ::mprotect(p, allocated_, PROT_READ);
    return true;
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), copied_ ? allocated_ : size_);
}

std::byte* allocate_pages(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

void free_pages(std::byte* p, std::size_t bytes) {
    if (p) ::munmap(p, bytes);
}

void* allocate_aligned(std::size_t alignment, std::size_t bytes) { return std::aligned_alloc(alignment, bytes); }

void free_aligned(void* p) { std::free(p); }

void advise_huge_pages(void* p, std::size_t bytes) { ::madvise(p, bytes, MADV_HUGEPAGE); }

void release_mapped_pages(const void* p, std::size_t bytes) {
    ::madvise(const_cast<void*>(p), bytes, MADV_DONTNEED);
}

namespace {

// The first number in `path` (a cgroup file of one value); nullopt if absent or not a number
// ("max").
std::optional<std::uint64_t> read_number(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::uint64_t v = 0;
    if (in >> v) return v;
    return std::nullopt;
}

// `key`'s value in a memory.stat file (lines "key value").
std::uint64_t stat_value(const std::filesystem::path& path, const std::string& key) {
    std::ifstream in(path);
    std::string k;
    std::uint64_t v = 0;
    while (in >> k >> v)
        if (k == key) return v;
    return 0;
}

}  // namespace

std::uint64_t cgroup_memory_left(const std::filesystem::path& root, const std::string& proc_self_cgroup) {
    // Lines "ID:CONTROLLERS:PATH": v2's "0::PATH", v1's "N:memory:PATH" (or "N:…,memory,…:PATH").
    std::istringstream lines(proc_self_cgroup);
    for (std::string line; std::getline(lines, line);) {
        const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), rel = line.substr(b + 1);
        const std::string group = rel.empty() || rel == "/" ? "" : rel.substr(rel[0] == '/' ? 1 : 0);
        std::optional<std::uint64_t> limit, usage;
        std::uint64_t inactive = 0;
        if (controllers.empty()) {
            const auto dir = root / group;
            limit = read_number(dir / "memory.max");
            usage = read_number(dir / "memory.current");
            inactive = stat_value(dir / "memory.stat", "inactive_file");
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
            const auto dir = root / "memory" / group;
            limit = read_number(dir / "memory.limit_in_bytes");
            usage = read_number(dir / "memory.usage_in_bytes");
            inactive = stat_value(dir / "memory.stat", "total_inactive_file");
        } else {
            continue;
        }
        // v1 writes "no limit" as the largest page-aligned 64-bit value.
        if (!limit || !usage || *limit >= (std::uint64_t{1} << 62)) continue;
        const std::uint64_t used = *usage > inactive ? *usage - inactive : 0;
        return *limit > used ? *limit - used : 1;  // 1: a limit, and nothing left under it
    }
    return 0;
}

std::uint64_t available_memory_bytes() {
    std::uint64_t avail = 0;
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib) {
        std::getline(meminfo, unit);
        if (key == "MemAvailable:") {
            avail = kib * 1024;
            break;
        }
    }
    std::ifstream cgroup("/proc/self/cgroup");
    const std::string text((std::istreambuf_iterator<char>(cgroup)), std::istreambuf_iterator<char>());
    const std::uint64_t left = cgroup_memory_left("/sys/fs/cgroup", text);
    return left && (avail == 0 || left < avail) ? left : avail;
}

bool huge_pages_offered() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(f, line);  // e.g. "always [madvise] never": the bracketed one is in force
    return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}

bool page_resident(const void* p) {
    const auto page = static_cast<std::uintptr_t>(page_size());
    auto addr = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
    unsigned char vec = 0;
    if (::mincore(reinterpret_cast<void*>(addr), page, &vec) != 0) return false;
    return vec & 1;
}

std::uint64_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::uint64_t pages_total = 0, pages_resident = 0;
    statm >> pages_total >> pages_resident;
    return pages_resident * page_size();
}

}  // namespace inkling::platform
