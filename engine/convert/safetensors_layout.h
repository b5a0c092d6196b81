// The layout of the model.safetensors the converter writes: every tensor's dtype, shape
// and place are known before the first byte, so the header goes first and the tensors
// stream after it. F32 tensors come first so that each starts on a 4-byte boundary (the
// format allows no gaps between tensors); the data begins on a 64-byte boundary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace inkling::convert {

struct SafetensorsEntry {
    std::string name;
    std::string dtype;  // "F32", "BF16", "F16", "I8", "U8"
    std::vector<std::int64_t> shape;
    std::int64_t bytes = 0;
    std::int64_t offset = 0;  // from the file's start (filled by layout_safetensors)
};

struct SafetensorsLayout {
    std::vector<SafetensorsEntry> entries;  // in file order
    std::string header;                     // u64 length + JSON + space padding
    std::int64_t file_bytes = 0;
};

// Orders `entries` (F32 first, otherwise as given), places them and encodes the header.
SafetensorsLayout layout_safetensors(std::vector<SafetensorsEntry> entries);

}  // namespace inkling::convert
