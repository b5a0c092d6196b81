// The routed-expert container `experts.inkx` written by `inkling convert` and read by the
// engine's expert store: one record per (sparse layer, expert), each record aligned to
// 4096 bytes so it can be read with O_DIRECT, and a CRC-32 per record. The converter and
// the reader share this file's layout arithmetic; docs/container.md is the normative text.
//
//   offset 0       magic "INKLEXP1" (8 bytes)
//   offset 8       u32 LE: length J of the JSON header;  offset 12: u32 LE 0
//   offset 16      J bytes of JSON (ContainerHeader), then zeros to an 8-byte boundary
//   then           the record table: one u32 LE CRC-32 (zlib's) a record, then zeros
//   data_offset    (a multiple of 4096) records back to back, record_bytes each, in
//                  order (layers[0], expert 0), (layers[0], expert 1), …
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/tensor.h"
#include "engine/quant/quantize.h"

namespace inkling::experts {

inline constexpr char kMagic[8] = {'I', 'N', 'K', 'L', 'E', 'X', 'P', '1'};
inline constexpr std::int64_t kAlign = 4096;      // record alignment (O_DIRECT)
inline constexpr std::int64_t kSectionAlign = 64; // section alignment inside a record
inline constexpr const char* kFileName = "experts.inkx";

enum class Format { Int8, Int4 };
const char* format_name(Format f);  // "int8", "int4"
Format parse_format(const std::string& name);  // throws std::invalid_argument

// Where one quantized matrix sits inside a record.
struct MatrixSection {
    std::int64_t rows = 0, cols = 0, padded = 0;  // padded: row stride in elements
    std::int64_t group = 0, groups = 0;           // columns per scale, scales a row
    std::int64_t data_at = 0, data_bytes = 0;     // q values, from the record's start
    std::int64_t scales_at = 0, scales_bytes = 0; // f32 [rows][groups]
};

// The three matrices of one expert: gate [I][D], up [I][D], down [D][I].
struct RecordLayout {
    Format format = Format::Int4;
    std::int64_t group = 32;  // int4 group size; int8 is per row (group = padded cols)
    MatrixSection gate, up, down;
    std::int64_t bytes = 0;   // record size, a multiple of kAlign
};
RecordLayout record_layout(Format format, std::int64_t group, std::int64_t hidden, std::int64_t inter);

// A view of `s` inside a record loaded at `record`.
model::Matrix section_view(const RecordLayout& layout, const MatrixSection& s, const std::byte* record);

struct ContainerHeader {
    int version = 1;
    Format format = Format::Int4;
    std::int64_t group = 32;
    std::int64_t hidden = 0, inter = 0, experts = 0;
    std::vector<int> layers;       // the sparse layers, in file order
    std::int64_t record_bytes = 0;
    std::int64_t data_offset = 0;
    std::string source;            // what it was converted from (informational)

    std::int64_t record_count() const { return static_cast<std::int64_t>(layers.size()) * experts; }
    std::int64_t record_offset(std::int64_t index) const { return data_offset + index * record_bytes; }
    std::int64_t file_bytes() const { return data_offset + record_count() * record_bytes; }
};

// The header bytes (magic, JSON, table of `crcs`, padding) up to data_offset, which this
// fills in along with record_bytes.
std::vector<std::byte> encode_header(ContainerHeader& header, const std::vector<std::uint32_t>& crcs);

struct ParsedHeader {
    ContainerHeader header;
    std::vector<std::uint32_t> crcs;
};
// Reads and validates the header of `path` (magic, JSON fields, layout arithmetic, the
// table, the file size). Throws std::runtime_error naming the file and what is wrong.
ParsedHeader read_header(const std::filesystem::path& path);

std::uint32_t crc32(const std::byte* data, std::size_t bytes);

}  // namespace inkling::experts
