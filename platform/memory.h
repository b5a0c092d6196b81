// Memory from the OS: read-only file mappings, anonymous page-aligned memory, the hints and
// queries on pages. POSIX: mmap/madvise/mincore, /proc/self/statm. Windows: file mapping
// objects, VirtualAlloc, QueryWorkingSetEx and GetProcessMemoryInfo.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace inkling::platform {

std::size_t page_size();

// How a MappedFile holds a file's bytes. Map: the OS's read-only file mapping — the page
// cache, shared with every process that maps the file, pages read on first touch and dropped
// under memory pressure. Copy: read once into this process's own memory, on huge pages where
// the OS offers them (Linux's THP) — a decode step reads every resident weight, and on 4 KiB
// pages each 4 KiB is a TLB miss and a stop for the hardware prefetchers.
enum class FileBacking { Map, Copy };

// A whole file, read-only (an empty file holds nothing). Throws std::runtime_error naming the
// file and the cause when it cannot be opened, mapped, allocated or read.
class MappedFile {
public:
    explicit MappedFile(const std::filesystem::path& path, FileBacking backing = FileBacking::Map);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }
    const std::string& path() const { return path_; }
    bool copied() const { return copied_; }
    // Copy only: the copy made writable for `edit` (given its first byte), then read-only
    // again — how the loader moves int8 weights into its kernels' order once, in place.
    // Returns false, calling nothing, for a mapping (the page cache's bytes are the file's).
    bool rewrite(const std::function<void(std::byte*)>& edit);

private:
    void copy_in(std::intptr_t handle);  // FileBacking::Copy: allocate, read (POSIX: an fd)

    std::string path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    bool copied_ = false;
    std::size_t allocated_ = 0;  // Copy: the bytes allocated at data_
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

// Memory the OS could give this process now without swapping, in bytes (Linux: /proc/meminfo's
// MemAvailable, or what is left under this process's cgroup memory limit when that is less —
// a container's limit, which MemAvailable, the node's, does not see; Windows: the available
// physical memory); 0 when unknown.
std::uint64_t available_memory_bytes();
#ifndef _WIN32
// What is left under the memory limit of the cgroup that `proc_self_cgroup` (the text of
// /proc/self/cgroup) names, with cgroupfs mounted at `root` (/sys/fs/cgroup): the limit less
// the group's usage, its inactive file pages (reclaimable) counted as free. cgroup v2
// (memory.max, memory.current, memory.stat inactive_file) or v1 (memory.limit_in_bytes,
// memory.usage_in_bytes, memory.stat total_inactive_file); 0 without a limit ("max", or v1's
// near-2^63 value) or a readable group. available_memory_bytes() uses it.
std::uint64_t cgroup_memory_left(const std::filesystem::path& root, const std::string& proc_self_cgroup);
#endif
// Whether advise_huge_pages can back memory with huge pages (Linux: THP enabled as "always"
// or "madvise"); false on Windows, whose large pages need a privilege.
bool huge_pages_offered();

// Whether the page holding `p` is in RAM (mincore / QueryWorkingSetEx).
bool page_resident(const void* p);
// The process's resident memory in bytes (/proc/self/statm / the working set).
std::uint64_t resident_bytes();

}  // namespace inkling::platform
