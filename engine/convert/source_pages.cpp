#include "engine/convert/source_pages.h"

#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "platform/memory.h"

namespace inkling::convert {

SourcePages::SourcePages(const model::SafetensorsSet& set) {
    // One tensor per file is enough: its data offset in the file locates the mapping.
    std::map<std::string, const model::TensorInfo*> one_per_file;
    for (const auto& [_, t] : set.tensors()) one_per_file.emplace(t.file, &t);
    for (const auto& [path, t] : one_per_file) {
        const platform::File fd = platform::open_file(path, platform::Open::Read);
        if (fd == platform::kNoFile) continue;  // dropping pages is an optimisation, never an error
        std::uint64_t header_len = 0;
        std::string header;
        bool ok = platform::read_at(fd, &header_len, 8, 0) == 8 && header_len < (100u << 20);
        if (ok) {
            header.resize(header_len);
            ok = platform::read_at(fd, header.data(), header_len, 8) == static_cast<std::int64_t>(header_len);
        }
        const auto j = ok ? nlohmann::json::parse(header, nullptr, false) : nlohmann::json();
        if (!j.is_object() || !j.contains(t->name)) {
            platform::close_file(fd);
            continue;
        }
        const auto begin = j[t->name]["data_offsets"][0].get<std::uint64_t>();
        const std::int64_t end = platform::file_size(fd);
        files_.push_back({t->data - (8 + header_len + begin), static_cast<std::size_t>(end), fd});
    }
}

SourcePages::~SourcePages() {
    for (const auto& f : files_) platform::close_file(f.fd);
}

void SourcePages::drop(const std::byte* begin, std::size_t bytes) const {
    for (const auto& f : files_) {
        if (begin < f.base || begin + bytes > f.base + f.size) continue;
        const auto page = static_cast<std::uintptr_t>(platform::page_size());
        const auto lo = reinterpret_cast<std::uintptr_t>(begin) / page * page;
        const auto hi = (reinterpret_cast<std::uintptr_t>(begin + bytes) + page - 1) / page * page;
        // Clamp to the mapping (whole pages of it): the rounded range may reach past the end.
        const auto map_lo = reinterpret_cast<std::uintptr_t>(f.base);
        const auto map_hi = map_lo + (f.size + page - 1) / page * page;
        const auto from = std::max(lo, map_lo), to = std::min(hi, map_hi);
        if (to > from) platform::release_mapped_pages(reinterpret_cast<const void*>(from), to - from);
        platform::drop_cached(f.fd, begin - f.base, static_cast<std::int64_t>(bytes));
        return;
    }
}

void SourcePages::drop(const model::Matrix& m) const {
    if (m.rows == 0) return;
    const std::byte* end = m.row(m.rows - 1) + model::dtype_bytes(m.dtype, m.cols);
    drop(m.data, static_cast<std::size_t>(end - m.data));
}

}  // namespace inkling::convert
