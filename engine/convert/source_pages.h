// Keeps the converter's memory bounded while it reads a checkpoint far larger than RAM:
// after a source tensor (or one expert's slice of it) is converted, its pages leave both
// the process (madvise DONTNEED on the mapping) and the page cache (posix_fadvise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "engine/model/tensor.h"
#include "platform/file_io.h"

namespace inkling::convert {

class SourcePages {
public:
    // Finds where each mapped file of `set` begins (from its header) and opens it for fadvise.
    explicit SourcePages(const model::SafetensorsSet& set);
    ~SourcePages();
    SourcePages(const SourcePages&) = delete;
    SourcePages& operator=(const SourcePages&) = delete;

    // Drops the pages of [begin, begin + bytes), which lies in one of the mapped files.
    void drop(const std::byte* begin, std::size_t bytes) const;
    // Drops the bytes a matrix view spans (first row's start to last row's end).
    void drop(const model::Matrix& m) const;

private:
    struct File {
        const std::byte* base = nullptr;  // where the mapping of byte 0 lies
        std::size_t size = 0;
        platform::File fd = platform::kNoFile;
    };
    std::vector<File> files_;
};

}  // namespace inkling::convert
