#include "engine/convert/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace inkling::convert {

std::filesystem::path OutputFile::partial_of(const std::filesystem::path& final_path) {
    return final_path.string() + ".partial";
}

OutputFile::OutputFile(std::filesystem::path final_path, bool keep)
    : final_(std::move(final_path)), partial_(partial_of(final_)) {
    fd_ = ::open(partial_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (keep ? 0 : O_TRUNC), 0644);
    if (fd_ < 0) fail("cannot create");
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void OutputFile::fail(const std::string& what) const {
    throw std::runtime_error("write " + partial_.string() + ": " + what + ": " + std::strerror(errno));
}

void OutputFile::pwrite_all(const void* data, std::size_t bytes, std::int64_t offset) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pwrite(fd_, p, bytes, offset);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("write failed");
        if (n == 0) {
            errno = ENOSPC;
            fail("write made no progress");
        }
        p += n;
        bytes -= static_cast<std::size_t>(n);
        offset += n;
    }
}

std::int64_t OutputFile::size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("cannot stat");
    return st.st_size;
}

void OutputFile::truncate(std::int64_t bytes) {
    if (::ftruncate(fd_, bytes) != 0) fail("cannot truncate");
}

void OutputFile::read_at(void* data, std::size_t bytes, std::int64_t offset) const {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pread(fd_, p, bytes, offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            fail("read back failed");
        }
        p += n;
        bytes -= static_cast<std::size_t>(n);
        offset += n;
    }
}

void OutputFile::commit() {
    if (::fsync(fd_) != 0) fail("fsync failed");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close failed");
    if (::rename(partial_.c_str(), final_.c_str()) != 0)
        throw std::runtime_error("rename " + partial_.string() + " to " + final_.string() + ": " +
                                 std::strerror(errno));
}

void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to) {
    std::ifstream in(from, std::ios::binary);
    if (!in) throw std::runtime_error(from.string() + ": cannot open");
    OutputFile out(to, false);
    std::vector<char> buf(1 << 20);
    std::int64_t at = 0;
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto n = static_cast<std::size_t>(in.gcount());
        if (n == 0) break;
        out.pwrite_all(buf.data(), n, at);
        at += static_cast<std::int64_t>(n);
    }
    if (in.bad()) throw std::runtime_error(from.string() + ": read failed");
    out.commit();
}

void write_file_atomically(const std::filesystem::path& to, const std::string& text) {
    OutputFile out(to, false);
    out.pwrite_all(text.data(), text.size(), 0);
    out.commit();
}

void sync_directory(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

}  // namespace inkling::convert
