// One output file of `inkling convert`, written as NAME.partial and made visible only by
// commit(): fsync, then rename to NAME. Every write error (ENOSPC, EIO, EFBIG) throws
// std::runtime_error naming the file and the system's reason; the caller removes the
// partial outputs (remove_partial) so a failed run leaves nothing half-written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "platform/file_io.h"

namespace inkling::convert {

class OutputFile {
public:
    // Opens `final_path`.partial for writing; `keep` keeps what is there (resuming),
    // else the file starts empty.
    OutputFile(std::filesystem::path final_path, bool keep);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    void pwrite_all(const void* data, std::size_t bytes, std::int64_t offset);
    std::int64_t size() const;
    void truncate(std::int64_t bytes);
    void read_at(void* data, std::size_t bytes, std::int64_t offset) const;
    // fsync, close, rename NAME.partial → NAME.
    void commit();

    const std::filesystem::path& partial_path() const { return partial_; }
    const std::filesystem::path& final_path() const { return final_; }
    static std::filesystem::path partial_of(const std::filesystem::path& final_path);

private:
    [[noreturn]] void fail(const std::string& what) const;
    std::filesystem::path final_, partial_;
    platform::File fd_ = platform::kNoFile;
};

// Copies `from` byte for byte to `to` (through to.partial, committed).
void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to);
// Writes `text` to `to` (through to.partial, committed).
void write_file_atomically(const std::filesystem::path& to, const std::string& text);
// fsync of a directory, so the renames inside it survive a crash.
void sync_directory(const std::filesystem::path& dir);

}  // namespace inkling::convert
