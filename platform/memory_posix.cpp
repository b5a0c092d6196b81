#include "platform/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path.string()) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(path_ + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        throw std::runtime_error(path_ + ": cannot stat");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
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

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
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
