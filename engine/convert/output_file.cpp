#include "engine/convert/output_file.h"

#include <fstream>
#include <stdexcept>
#include <vector>

#include "platform/file_io.h"

namespace inkling::convert {

std::filesystem::path OutputFile::partial_of(const std::filesystem::path& final_path) {
    return final_path.string() + ".partial";
}

OutputFile::OutputFile(std::filesystem::path final_path, bool keep)
    : final_(std::move(final_path)), partial_(partial_of(final_)) {
    fd_ = platform::open_file(partial_, keep ? platform::Open::ReadWrite : platform::Open::ReadWriteNew);
    if (fd_ == platform::kNoFile) fail("cannot create");
}

OutputFile::~OutputFile() {
    platform::close_file(fd_);
}

void OutputFile::fail(const std::string& what) const {
    throw std::runtime_error("write " + partial_.string() + ": " + what + ": " + platform::last_error());
}

void OutputFile::pwrite_all(const void* data, std::size_t bytes, std::int64_t offset) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const std::int64_t n = platform::write_at(fd_, p, bytes, offset);
        if (n < 0) fail("write failed");
        if (n == 0)
            throw std::runtime_error("write " + partial_.string() + ": write made no progress (no space left on device?)");
        p += n;
        bytes -= static_cast<std::size_t>(n);
        offset += n;
    }
}

std::int64_t OutputFile::size() const {
    const std::int64_t bytes = platform::file_size(fd_);
    if (bytes < 0) fail("cannot stat");
    return bytes;
}

void OutputFile::truncate(std::int64_t bytes) {
    if (!platform::resize_file(fd_, bytes)) fail("cannot truncate");
}

void OutputFile::read_at(void* data, std::size_t bytes, std::int64_t offset) const {
    std::string err;
    if (platform::read_all_at(fd_, data, bytes, offset, err)) return;
    if (!err.empty()) fail("read back failed");
    throw std::runtime_error("write " + partial_.string() + ": read back failed: unexpected end of file");
}

void OutputFile::commit() {
    if (!platform::sync_file(fd_)) fail("fsync failed");
    const platform::File fd = fd_;
    fd_ = platform::kNoFile;
    if (!platform::close_file(fd)) fail("close failed");
    if (!platform::replace_file(partial_, final_))
        throw std::runtime_error("rename " + partial_.string() + " to " + final_.string() + ": " +
                                 platform::last_error());
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

void sync_directory(const std::filesystem::path& dir) { platform::sync_directory(dir); }

}  // namespace inkling::convert
