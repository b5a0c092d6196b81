#include "platform/file_io.h"

#include <windows.h>
#include <io.h>

#include "platform/windows_error.h"

namespace inkling::platform {
namespace {

HANDLE h(File f) { return reinterpret_cast<HANDLE>(f); }

// A synchronous handle's ReadFile/WriteFile at `offset` (pread/pwrite): the offset rides in
// an OVERLAPPED; one call moves at most 1 GiB (a DWORD count).
OVERLAPPED at_offset(std::int64_t offset) {
    OVERLAPPED at{};
    at.Offset = static_cast<DWORD>(offset);
    at.OffsetHigh = static_cast<DWORD>(static_cast<std::uint64_t>(offset) >> 32);
    return at;
}

DWORD capped(std::size_t bytes) { return bytes > 0x40000000u ? 0x40000000u : static_cast<DWORD>(bytes); }

}  // namespace

File open_file(const std::filesystem::path& path, Open how) {
    DWORD access = GENERIC_READ, disposition = OPEN_EXISTING, flags = FILE_ATTRIBUTE_NORMAL;
    // Others may read, write, rename or delete it meanwhile, as on POSIX.
    const DWORD share = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
    switch (how) {
        case Open::Read: break;
        case Open::ReadUnbuffered: flags |= FILE_FLAG_NO_BUFFERING; break;
        case Open::ReadWrite: access |= GENERIC_WRITE; disposition = OPEN_ALWAYS; break;
        case Open::ReadWriteNew: access |= GENERIC_WRITE; disposition = CREATE_ALWAYS; break;
        case Open::CreateNew: access = GENERIC_WRITE; disposition = CREATE_NEW; break;
    }
    // A null security descriptor's handle is not inheritable: no child gets it.
    HANDLE f = CreateFileW(path.wstring().c_str(), access, share, nullptr, disposition, flags, nullptr);
    if (f == INVALID_HANDLE_VALUE) {
        remember_error(GetLastError());
        return kNoFile;
    }
    return reinterpret_cast<File>(f);
}

bool close_file(File f) { return f == kNoFile || CloseHandle(h(f)) != 0 || (remember_error(GetLastError()), false); }

std::int64_t read_at(File f, void* buf, std::size_t bytes, std::int64_t offset) {
    OVERLAPPED at = at_offset(offset);
    DWORD got = 0;
    if (ReadFile(h(f), buf, capped(bytes), &got, &at)) return got;
    const DWORD err = GetLastError();
    if (err == ERROR_HANDLE_EOF) return 0;
    remember_error(err);
    return -1;
}

std::int64_t write_at(File f, const void* buf, std::size_t bytes, std::int64_t offset) {
    OVERLAPPED at = at_offset(offset);
    DWORD put = 0;
    if (WriteFile(h(f), buf, capped(bytes), &put, &at)) return put;
    remember_error(GetLastError());
    return -1;
}

std::int64_t file_size(File f) {
    LARGE_INTEGER size{};
    if (!GetFileSizeEx(h(f), &size)) {
        remember_error(GetLastError());
        return -1;
    }
    return size.QuadPart;
}

bool resize_file(File f, std::int64_t bytes) {
    FILE_END_OF_FILE_INFO eof{};
    eof.EndOfFile.QuadPart = bytes;
    if (SetFileInformationByHandle(h(f), FileEndOfFileInfo, &eof, sizeof eof)) return true;
    remember_error(GetLastError());
    return false;
}

bool sync_file(File f) {
    if (FlushFileBuffers(h(f))) return true;
    remember_error(GetLastError());
    return false;
}

void drop_cached(File, std::int64_t, std::int64_t) {}

bool replace_file(const std::filesystem::path& from, const std::filesystem::path& to) {
    if (MoveFileExW(from.wstring().c_str(), to.wstring().c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
        return true;
    remember_error(GetLastError());
    return false;
}

void sync_directory(const std::filesystem::path&) {}

bool writable(const std::filesystem::path& path) { return _waccess(path.wstring().c_str(), 2) == 0; }

std::string last_error() { return remembered_error(); }

}  // namespace inkling::platform
