// Files by offset: positioned reads and writes, unbuffered reads, durable replacement.
// POSIX: pread/pwrite on descriptors, O_DIRECT, fsync, rename. Windows: HANDLEs,
// ReadFile/WriteFile at an OVERLAPPED offset, FILE_FLAG_NO_BUFFERING, FlushFileBuffers,
// MoveFileEx(REPLACE_EXISTING | WRITE_THROUGH).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace inkling::platform {

// The text of the last failure of a call below (strerror(errno) / FormatMessage).
std::string last_error();

// An open file: a descriptor on POSIX, a HANDLE on Windows; kNoFile when none.
using File = std::intptr_t;
inline constexpr File kNoFile = -1;

enum class Open {
    Read,            // read only
    ReadUnbuffered,  // read only, past the page cache (offsets, sizes, buffers 4096-aligned)
    ReadWrite,       // read and write, created (mode 0644) if missing
    ReadWriteNew,    // read and write, created or emptied
    CreateNew,       // write, a fresh file only (fails if the name exists), private (0600)
};

// kNoFile on failure; last_error() says why. Never inherited by child processes.
File open_file(const std::filesystem::path& path, Open how);
// False when the close reported an error (a write that failed late).
bool close_file(File f);

// Bytes moved (fewer at the end of the file, 0 at it), or -1 on an error. EINTR is retried.
std::int64_t read_at(File f, void* buf, std::size_t bytes, std::int64_t offset);
// Exactly `bytes` at `offset` (read_at may move fewer); false on an error (`err` then says
// what) or at the end of the file first (`err` empty).
inline bool read_all_at(File f, void* buf, std::size_t bytes, std::int64_t offset, std::string& err) {
    auto* p = static_cast<std::byte*>(buf);
    for (std::size_t done = 0; done < bytes;) {
        const std::int64_t n = read_at(f, p + done, bytes - done, offset + static_cast<std::int64_t>(done));
        if (n <= 0) {
            err = n < 0 ? last_error() : "";
            return false;
        }
        done += static_cast<std::size_t>(n);
    }
    return true;
}
std::int64_t write_at(File f, const void* buf, std::size_t bytes, std::int64_t offset);
std::int64_t file_size(File f);  // -1 on an error
bool resize_file(File f, std::int64_t bytes);
bool sync_file(File f);
// Tells the OS the range will not be read again soon (POSIX_FADV_DONTNEED); Windows has no
// such per-range hint for cached files, so there it does nothing.
void drop_cached(File f, std::int64_t offset, std::int64_t bytes);

// Renames `from` over `to` (atomically where the OS can); false on failure, last_error() says why.
bool replace_file(const std::filesystem::path& from, const std::filesystem::path& to);
// Makes a rename inside `dir` durable (fsync of the directory; NTFS journals it: nothing).
void sync_directory(const std::filesystem::path& dir);

// Whether this process may write into `path` (access(W_OK) / _waccess).
bool writable(const std::filesystem::path& path);

}  // namespace inkling::platform
