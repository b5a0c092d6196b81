// Memory from the OS: read-only file mappings, anonymous page-aligned memory, the hints and
// queries on pages. POSIX: mmap/madvise/mincore, /proc/self/statm. Windows: file mapping
// objects, VirtualAlloc, QueryWorkingSetEx and GetProcessMemoryInfo.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace inkling::platform {

std::size_t page_size();

// A whole file mapped read-only (empty files map to nothing). Throws std::runtime_error
// naming the file and the cause when it cannot be opened or mapped.
class MappedFile {
public:
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::intptr_t mapping_ = -1;  // Windows: the file mapping object's HANDLE
};

// Page-aligned zeroed memory straight from the OS (aligned for unbuffered reads), nullptr
// when it cannot be had; freed with free_pages(p, the same bytes).
std::byte* allocate_pages(std::size_t bytes);
void free_pages(std::byte* p, std::size_t bytes);

// Heap memory aligned to `alignment` (a power of two, e.g. 2 MiB for huge pages), nullptr
// when it cannot be had; freed with free_aligned. POSIX: aligned_alloc; Windows, whose free()
// cannot release that: _aligned_malloc.
void* allocate_aligned(std::size_t alignment, std::size_t bytes);
void free_aligned(void* p);

// Hints, never errors: back [p, p + bytes) with huge pages (MADV_HUGEPAGE); drop the pages of
// a file mapping from this process (MADV_DONTNEED; Windows: nothing of the kind for a view).
void advise_huge_pages(void* p, std::size_t bytes);
void release_mapped_pages(const void* p, std::size_t bytes);

// Whether the page holding `p` is in RAM (mincore / QueryWorkingSetEx).
bool page_resident(const void* p);
// The process's resident memory in bytes (/proc/self/statm / the working set).
std::uint64_t resident_bytes();

}  // namespace inkling::platform
