#include "engine/convert/safetensors_layout.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

namespace inkling::convert {

SafetensorsLayout layout_safetensors(std::vector<SafetensorsEntry> entries) {
    std::stable_partition(entries.begin(), entries.end(), [](const auto& e) { return e.dtype == "F32"; });
    nlohmann::ordered_json j;
    j["__metadata__"] = {{"format", "pt"}, {"writer", "inkling convert"}};
    std::int64_t at = 0;
    for (auto& e : entries) {
        j[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + e.bytes}}};
        e.offset = at;
        at += e.bytes;
    }
    std::string text = j.dump();
    text.resize((8 + text.size() + 63) / 64 * 64 - 8, ' ');
    SafetensorsLayout l;
    const std::uint64_t n = text.size();
    l.header.resize(8);
    std::memcpy(l.header.data(), &n, 8);  // little-endian hosts only, like the reader
    l.header += text;
    const auto data_start = static_cast<std::int64_t>(l.header.size());
    for (auto& e : entries) e.offset += data_start;
    l.file_bytes = data_start + at;
    l.entries = std::move(entries);
    return l;
}

}  // namespace inkling::convert
