#include "engine/experts/container_format.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace inkling::experts {
namespace {

std::int64_t align_up(std::int64_t v, std::int64_t a) { return (v + a - 1) / a * a; }

// Places one [rows][cols] matrix at `at`, returns the offset just past it.
std::int64_t place(MatrixSection& s, Format format, std::int64_t group, std::int64_t rows, std::int64_t cols,
                   std::int64_t at) {
    s.rows = rows;
    s.cols = cols;
    s.padded = quant::padded_cols(cols);
    s.group = format == Format::Int8 ? s.padded : group;
    s.groups = (s.padded + s.group - 1) / s.group;
    s.data_at = align_up(at, kSectionAlign);
    s.data_bytes = static_cast<std::int64_t>(
        model::dtype_bytes(format == Format::Int8 ? model::DType::I8 : model::DType::Q4, rows * s.padded));
    s.scales_at = align_up(s.data_at + s.data_bytes, kSectionAlign);
    s.scales_bytes = rows * s.groups * 4;
    return s.scales_at + s.scales_bytes;
}

void put_u32(std::byte* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
std::uint32_t get_u32(const std::byte* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
    return v;
}

}  // namespace

const char* format_name(Format f) { return f == Format::Int8 ? "int8" : "int4"; }

Format parse_format(const std::string& name) {
    if (name == "int8") return Format::Int8;
    if (name == "int4") return Format::Int4;
    throw std::invalid_argument("unknown expert format '" + name + "' (int4 or int8)");
}

RecordLayout record_layout(Format format, std::int64_t group, std::int64_t hidden, std::int64_t inter) {
    if (format == Format::Int4 && (group <= 0 || group % 32 != 0))
        throw std::invalid_argument("int4 group size must be a positive multiple of 32, not " + std::to_string(group));
    RecordLayout l;
    l.format = format;
    l.group = format == Format::Int8 ? 0 : group;
    std::int64_t at = place(l.gate, format, group, inter, hidden, 0);
    at = place(l.up, format, group, inter, hidden, at);
    at = place(l.down, format, group, hidden, inter, at);
    l.bytes = align_up(at, kAlign);
    return l;
}

model::Matrix section_view(const RecordLayout& layout, const MatrixSection& s, const std::byte* record) {
    model::Matrix m;
    m.data = record + s.data_at;
    m.dtype = layout.format == Format::Int8 ? model::DType::I8 : model::DType::Q4;
    m.rows = s.rows;
    m.cols = s.cols;
    m.row_stride = s.padded;
    m.scales = reinterpret_cast<const float*>(record + s.scales_at);
    m.group = s.group;
    m.scale_stride = s.groups;
    return m;
}

std::vector<std::byte> encode_header(ContainerHeader& h, const std::vector<std::uint32_t>& crcs) {
    const RecordLayout layout = record_layout(h.format, h.group, h.hidden, h.inter);
    h.record_bytes = layout.bytes;
    if (static_cast<std::int64_t>(crcs.size()) != h.record_count())
        throw std::invalid_argument("encode_header: " + std::to_string(crcs.size()) + " CRCs for " +
                                    std::to_string(h.record_count()) + " records");
    // data_offset depends on the JSON's length, which holds data_offset: settle it by
    // growing it until the header fits.
    std::int64_t data_offset = kAlign;
    std::string text;
    for (;;) {
        nlohmann::json j = {{"version", h.version},          {"format", format_name(h.format)},
                            {"group", h.group},              {"hidden", h.hidden},
                            {"inter", h.inter},              {"experts", h.experts},
                            {"layers", h.layers},            {"record_bytes", h.record_bytes},
                            {"data_offset", data_offset},    {"source", h.source}};
        text = j.dump();
        const std::int64_t table_at = align_up(16 + static_cast<std::int64_t>(text.size()), 8);
        const std::int64_t need = align_up(table_at + 4 * h.record_count(), kAlign);
        if (need <= data_offset) break;
        data_offset = need;
    }
    h.data_offset = data_offset;
    std::vector<std::byte> out(static_cast<std::size_t>(data_offset), std::byte{0});
    std::memcpy(out.data(), kMagic, 8);
    put_u32(out.data() + 8, static_cast<std::uint32_t>(text.size()));
    std::memcpy(out.data() + 16, text.data(), text.size());
    const std::int64_t table_at = align_up(16 + static_cast<std::int64_t>(text.size()), 8);
    for (std::size_t i = 0; i < crcs.size(); ++i) put_u32(out.data() + table_at + 4 * i, crcs[i]);
    return out;
}

ParsedHeader read_header(const std::filesystem::path& path) {
    auto fail = [&](const std::string& what) { throw std::runtime_error(path.string() + ": " + what); };
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open the expert container");
    const auto file_size = static_cast<std::int64_t>(std::filesystem::file_size(path));
    std::byte fixed[16];
    if (!in.read(reinterpret_cast<char*>(fixed), 16)) fail("shorter than its 16-byte preamble");
    if (std::memcmp(fixed, kMagic, 8) != 0) fail("not an Inkling expert container (bad magic)");
    const std::uint32_t json_len = get_u32(fixed + 8);
    if (json_len == 0 || json_len > (1u << 24) || 16 + static_cast<std::int64_t>(json_len) > file_size)
        fail("header length " + std::to_string(json_len) + " does not fit the file");
    std::string text(json_len, '\0');
    if (!in.read(text.data(), json_len)) fail("truncated header");
    ParsedHeader p;
    ContainerHeader& h = p.header;
    try {
        const auto j = nlohmann::json::parse(text);
        h.version = j.at("version").get<int>();
        if (h.version != 1) fail("container version " + std::to_string(h.version) + " (this engine reads 1)");
        h.format = parse_format(j.at("format").get<std::string>());
        h.group = j.at("group").get<std::int64_t>();
        h.hidden = j.at("hidden").get<std::int64_t>();
        h.inter = j.at("inter").get<std::int64_t>();
        h.experts = j.at("experts").get<std::int64_t>();
        h.layers = j.at("layers").get<std::vector<int>>();
        h.record_bytes = j.at("record_bytes").get<std::int64_t>();
        h.data_offset = j.at("data_offset").get<std::int64_t>();
        h.source = j.value("source", "");
    } catch (const nlohmann::json::exception& e) {
        fail(std::string("bad header JSON: ") + e.what());
    } catch (const std::invalid_argument& e) {
        fail(e.what());
    }
    if (h.hidden <= 0 || h.inter <= 0 || h.experts <= 0 || h.layers.empty())
        fail("header has a zero or negative size (hidden, inter, experts or layers)");
    RecordLayout layout;
    try {
        layout = record_layout(h.format, h.format == Format::Int8 ? 32 : h.group, h.hidden, h.inter);
    } catch (const std::invalid_argument& e) {
        fail(e.what());
    }
    if (layout.bytes != h.record_bytes)
        fail("record_bytes " + std::to_string(h.record_bytes) + " does not match the layout (" +
             std::to_string(layout.bytes) + ")");
    const std::int64_t table_at = align_up(16 + json_len, 8);
    if (h.data_offset % kAlign != 0 || h.data_offset < table_at + 4 * h.record_count())
        fail("data_offset " + std::to_string(h.data_offset) + " is misplaced");
    if (file_size != h.file_bytes())
        fail("file is " + std::to_string(file_size) + " bytes, the header describes " +
             std::to_string(h.file_bytes()) + " (truncated or padded)");
    std::vector<std::byte> table(static_cast<std::size_t>(4 * h.record_count()));
    in.seekg(table_at);
    if (!in.read(reinterpret_cast<char*>(table.data()), static_cast<std::streamsize>(table.size())))
        fail("truncated record table");
    p.crcs.resize(static_cast<std::size_t>(h.record_count()));
    for (std::size_t i = 0; i < p.crcs.size(); ++i) p.crcs[i] = get_u32(table.data() + 4 * i);
    return p;
}

std::uint32_t crc32(const std::byte* data, std::size_t bytes) {
    uLong c = ::crc32(0L, Z_NULL, 0);
    while (bytes > 0) {
        const auto n = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
        c = ::crc32(c, reinterpret_cast<const Bytef*>(data), n);
        data += n;
        bytes -= n;
    }
    return static_cast<std::uint32_t>(c);
}

}  // namespace inkling::experts
