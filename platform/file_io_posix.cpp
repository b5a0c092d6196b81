#include "platform/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace inkling::platform {

File open_file(const std::filesystem::path& path, Open how) {
    int flags = O_CLOEXEC;
    mode_t mode = 0644;
    switch (how) {
        case Open::Read: flags |= O_RDONLY; break;
        case Open::ReadUnbuffered: flags |= O_RDONLY | O_DIRECT; break;
        case Open::ReadWrite: flags |= O_RDWR | O_CREAT; break;
        case Open::ReadWriteNew: flags |= O_RDWR | O_CREAT | O_TRUNC; break;
        case Open::CreateNew: flags |= O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW; mode = 0600; break;
    }
    const int fd = ::open(path.c_str(), flags, mode);
    return fd < 0 ? kNoFile : fd;
}

bool close_file(File f) { return f == kNoFile || ::close(static_cast<int>(f)) == 0; }

std::int64_t read_at(File f, void* buf, std::size_t bytes, std::int64_t offset) {
    while (true) {
        const ssize_t n = ::pread(static_cast<int>(f), buf, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        return n;
    }
}

std::int64_t write_at(File f, const void* buf, std::size_t bytes, std::int64_t offset) {
    while (true) {
        const ssize_t n = ::pwrite(static_cast<int>(f), buf, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        return n;
    }
}

std::int64_t file_size(File f) {
    struct stat st {};
    if (::fstat(static_cast<int>(f), &st) != 0) return -1;
    return st.st_size;
}

bool resize_file(File f, std::int64_t bytes) { return ::ftruncate(static_cast<int>(f), bytes) == 0; }

bool sync_file(File f) { return ::fsync(static_cast<int>(f)) == 0; }

void drop_cached(File f, std::int64_t offset, std::int64_t bytes) {
    ::posix_fadvise(static_cast<int>(f), static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

bool replace_file(const std::filesystem::path& from, const std::filesystem::path& to) {
    return ::rename(from.c_str(), to.c_str()) == 0;
}

void sync_directory(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

bool writable(const std::filesystem::path& path) { return ::access(path.c_str(), W_OK) == 0; }

std::string last_error() { return std::strerror(errno); }

}  // namespace inkling::platform
