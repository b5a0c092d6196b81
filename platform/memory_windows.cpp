#include "platform/memory.h"

#include <windows.h>
#include <psapi.h>

#include <malloc.h>

#include <stdexcept>
#include <string>

#include "platform/file_io.h"
#include "platform/windows_error.h"

namespace inkling::platform {

std::size_t page_size() {
    SYSTEM_INFO si{};
    GetSystemInfo(&si);
    return si.dwPageSize;
}

MappedFile::MappedFile(const std::filesystem::path& path, FileBacking backing) : path_(path.string()) {
    HANDLE file = CreateFileW(path.wstring().c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr,
                              OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (file == INVALID_HANDLE_VALUE) throw std::runtime_error(path_ + ": cannot open: " + error_text(GetLastError()));
    LARGE_INTEGER size{};
    if (!GetFileSizeEx(file, &size)) {
        const DWORD err = GetLastError();
        CloseHandle(file);
        throw std::runtime_error(path_ + ": cannot stat: " + error_text(err));
    }
    size_ = static_cast<std::size_t>(size.QuadPart);
    if (size_ > 0 && backing == FileBacking::Copy) {
        try {
            copy_in(reinterpret_cast<std::intptr_t>(file));
        } catch (...) {
            CloseHandle(file);
            throw;
        }
        CloseHandle(file);
    } else if (size_ > 0) {
        HANDLE mapping = CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
        const void* view = mapping ? MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0) : nullptr;
        const DWORD err = GetLastError();
        CloseHandle(file);  // the mapping keeps the file
        if (!view) {
            if (mapping) CloseHandle(mapping);
            throw std::runtime_error(path_ + ": mapping failed: " + error_text(err));
        }
        mapping_ = reinterpret_cast<std::intptr_t>(mapping);
        data_ = static_cast<const std::byte*>(view);
    } else {
        CloseHandle(file);
    }
}

// Windows: committed pages of the process's own (no large pages: they need a privilege).
void MappedFile::copy_in(std::intptr_t handle) {
    std::byte* p = allocate_pages(size_);
    if (!p)
        throw std::runtime_error(path_ + ": cannot allocate " + std::to_string(size_) +
                                 " bytes to copy it into: " + error_text(GetLastError()));
    std::string err;
    if (!read_all_at(handle, p, size_, 0, err)) {
        free_pages(p, size_);
        throw std::runtime_error(path_ + ": reading its " + std::to_string(size_) +
                                 " bytes failed: " + (err.empty() ? "unexpected end" : err));
    }
    DWORD old = 0;
    VirtualProtect(p, size_, PAGE_READONLY, &old);
    data_ = p;
    allocated_ = size_;
    copied_ = true;
}

bool MappedFile::rewrite(const std::function<void(std::byte*)>& edit) {
    if (!copied_) return false;
    auto* p = const_cast<std::byte*>(data_);
    DWORD old = 0;
    if (!VirtualProtect(p, allocated_, PAGE_READWRITE, &old))
        throw std::runtime_error(path_ + ": cannot make its copy writable: " + error_text(GetLastError()));
    try {
        edit(p);
    } catch (...) {
        VirtualProtect(p, allocated_, PAGE_READONLY, &old);
        throw;
    }
    VirtualProtect(p, allocated_, PAGE_READONLY, &old);
    return true;
}

MappedFile::~MappedFile() {
    if (data_ && copied_) free_pages(const_cast<std::byte*>(data_), allocated_);
    else if (data_) UnmapViewOfFile(data_);
    if (mapping_ != -1) CloseHandle(reinterpret_cast<HANDLE>(mapping_));
}

std::byte* allocate_pages(std::size_t bytes) {
    return static_cast<std::byte*>(VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE));
}

void free_pages(std::byte* p, std::size_t) {
    if (p) VirtualFree(p, 0, MEM_RELEASE);
}

void* allocate_aligned(std::size_t alignment, std::size_t bytes) { return _aligned_malloc(bytes, alignment); }

void free_aligned(void* p) { _aligned_free(p); }

// Large pages on Windows need SeLockMemoryPrivilege and an allocation made for them
// (MEM_LARGE_PAGES); there is no after-the-fact hint as madvise gives.
void advise_huge_pages(void*, std::size_t) {}

// A view's pages stay until unmapped; the OS trims them from the working set under pressure.
void release_mapped_pages(const void*, std::size_t) {}

std::uint64_t available_memory_bytes() {
    MEMORYSTATUSEX status{};
    status.dwLength = sizeof status;
    return GlobalMemoryStatusEx(&status) ? status.ullAvailPhys : 0;
}

bool huge_pages_offered() { return false; }

bool page_resident(const void* p) {
    PSAPI_WORKING_SET_EX_INFORMATION info{};
    info.VirtualAddress = const_cast<void*>(p);
    if (!QueryWorkingSetEx(GetCurrentProcess(), &info, sizeof info)) return false;
    return info.VirtualAttributes.Valid != 0;
}

std::uint64_t resident_bytes() {
    PROCESS_MEMORY_COUNTERS pmc{};
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return 0;
    return pmc.WorkingSetSize;
}

}  // namespace inkling::platform
