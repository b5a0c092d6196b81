#include "platform/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

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
    const int fd = static_cast<int>(handle);
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
    for (std::size_t done = 0; done < size_;) {
        const ssize_t n = ::pread(fd, p + done, std::min<std::size_t>(size_ - done, std::size_t{1} << 30),
                                  static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = errno;
            ::munmap(p, bytes);
            throw std::runtime_error(path_ + ": read failed at byte " + std::to_string(done) + " of " +
                                     std::to_string(size_) + ": " + (n < 0 ? std::strerror(err) : "unexpected end"));
        }
        done += static_cast<std::size_t>(n);
    }
    ::mprotect(p, bytes, PROT_READ);  // as read-only as the mapping it stands for
    data_ = p;
    allocated_ = bytes;
    copied_ = true;
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

std::uint64_t available_memory_bytes() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib) {
        std::getline(meminfo, unit);
        if (key == "MemAvailable:") return kib * 1024;
    }
    return 0;
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
