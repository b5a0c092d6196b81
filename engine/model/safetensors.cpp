#include "engine/model/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "engine/model/lane_order.h"
#include "platform/memory.h"

namespace inkling::model {

// The whole-file read-only mapping of platform/memory.h, under the name safetensors.h
// declares (its users need not see the platform header).
class MappedFile : public platform::MappedFile {
public:
    using platform::MappedFile::MappedFile;
};

WeightsMemory parse_weights_memory(const std::string& text) {
    if (text == "auto") return WeightsMemory::Auto;
    if (text == "map") return WeightsMemory::Map;
    if (text == "copy") return WeightsMemory::Copy;
    throw std::runtime_error("--load-weights: '" + text + "' is not auto, map or copy");
}

std::int64_t TensorInfo::numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string TensorInfo::shape_text() const {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

namespace {

DType parse_dtype(const std::string& text, const std::string& where) {
    if (text == "F32") return DType::F32;
    if (text == "BF16") return DType::BF16;
    if (text == "F16") return DType::F16;
    // Quantized matrices: int8 values, or int4 packed two a byte (docs/container.md).
    if (text == "I8") return DType::I8;
    if (text == "U8") return DType::U8;
    throw std::runtime_error(where + ": unsupported dtype " + text + " (F32, BF16, F16, I8 and U8 are read)");
}

}  // namespace

void SafetensorsSet::add_file(const std::filesystem::path& path, bool copy) {
    auto file = std::make_shared<MappedFile>(path, copy ? platform::FileBacking::Copy : platform::FileBacking::Map);
    const std::string& p = file->path();
    if (file->size() < 8) throw std::runtime_error(p + ": truncated (no 8-byte header length)");
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, file->data(), 8);  // little-endian on every host we build for
    if (header_len > file->size() - 8 || header_len > (100u << 20))
        throw std::runtime_error(p + ": header length " + std::to_string(header_len) +
                                 " runs past the end of the file (" + std::to_string(file->size()) +
                                 " bytes): truncated or not safetensors");
    const char* hdr = reinterpret_cast<const char*>(file->data()) + 8;
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(hdr, hdr + header_len);
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(p + ": header is not valid JSON: " + e.what());
    }
    if (!header.is_object()) throw std::runtime_error(p + ": header is not a JSON object");
    const std::size_t data_start = 8 + header_len;
    const std::size_t data_size = file->size() - data_start;
    for (auto& [name, entry] : header.items()) {
        if (name == "__metadata__") continue;
        std::string where = p + ": tensor " + name;
        if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
            !entry.contains("data_offsets"))
            throw std::runtime_error(where + ": entry lacks dtype, shape or data_offsets");
        TensorInfo t;
        t.name = name;
        t.file = p;
        t.dtype = parse_dtype(entry["dtype"].get<std::string>(), where);
        for (const auto& d : entry["shape"]) {
            if (!d.is_number_integer() || d.get<long long>() < 0)
                throw std::runtime_error(where + ": bad shape " + entry["shape"].dump());
            t.shape.push_back(d.get<std::int64_t>());
        }
        const auto& off = entry["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            throw std::runtime_error(where + ": bad data_offsets " + off.dump());
        std::uint64_t begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
        if (begin > end || end > data_size)
            throw std::runtime_error(where + ": data_offsets [" + std::to_string(begin) + ", " +
                                     std::to_string(end) + ") lie outside the " + std::to_string(data_size) +
                                     " data bytes: file truncated or corrupt");
        t.nbytes = static_cast<std::size_t>(end - begin);
        if (static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype) != t.nbytes)
            throw std::runtime_error(where + ": shape " + t.shape_text() + " of " + dtype_name(t.dtype) +
                                     " needs " + std::to_string(t.numel() * dtype_size(t.dtype)) +
                                     " bytes, data_offsets give " + std::to_string(t.nbytes));
        t.data = file->data() + data_start + begin;
        if (tensors_.count(name))
            throw std::runtime_error(where + ": also present in " + tensors_[name].file);
        tensors_.emplace(name, std::move(t));
    }
    files_.push_back(std::move(file));
}

SafetensorsSet SafetensorsSet::open_file(const std::filesystem::path& file) {
    SafetensorsSet set;
    set.add_file(file);
    return set;
}

SafetensorsSet SafetensorsSet::open_dir(const std::filesystem::path& dir, WeightsMemory memory) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(dir)) throw std::runtime_error(dir.string() + ": not a directory");
    std::set<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().extension() == ".safetensors") files.insert(entry.path());
    auto index_path = dir / "model.safetensors.index.json";
    if (fs::exists(index_path)) {
        std::ifstream in(index_path);
        nlohmann::json index;
        try {
            in >> index;
        } catch (const nlohmann::json::exception& e) {
            throw std::runtime_error(index_path.string() + ": not valid JSON: " + e.what());
        }
        if (!index.contains("weight_map") || !index["weight_map"].is_object())
            throw std::runtime_error(index_path.string() + ": no weight_map object");
        for (auto& [name, shard] : index["weight_map"].items()) {
            fs::path shard_path = dir / shard.get<std::string>();
            if (!fs::exists(shard_path))
                throw std::runtime_error(index_path.string() + ": shard " + shard.get<std::string>() +
                                         " (holding " + name + ") is missing");
        }
    }
    if (files.empty()) throw std::runtime_error(dir.string() + ": no *.safetensors files");
    SafetensorsSet set;
    set.copied_ = memory == WeightsMemory::Copy;
    if (memory == WeightsMemory::Auto) {
        // Half the available memory leaves the rest to the KV cache, the expert cache and the
        // page cache; past it (a bf16 checkpoint with every expert, say) the OS pages them.
        std::uintmax_t bytes = 0;
        for (const auto& f : files) bytes += fs::file_size(f);
        set.copied_ = platform::huge_pages_offered() && bytes <= platform::available_memory_bytes() / 2;
    }
    for (const auto& f : files) set.add_file(f, set.copied_);
    return set;
}

std::size_t SafetensorsSet::pack_lane_order() {
    std::size_t packed = 0;
    for (const auto& file : files_) {
        std::vector<TensorInfo*> mine;
        for (auto& [name, t] : tensors_)
            if (t.file == file->path() && (t.dtype == DType::I8 || t.dtype == DType::U8) && !t.lane_packed && !t.shape.empty() &&
                t.shape.back() > 0 && tensors_.count(name + ".scales"))
                mine.push_back(&t);
        if (mine.empty()) continue;
        const bool done = file->rewrite([&](std::byte* base) {
            for (const TensorInfo* t : mine) {
                // Rows of `padded` int8 or padded/2 bytes of int4 (padded a multiple of 32):
                // the groups depend on it alone.
                const DType q = t->dtype == DType::U8 ? DType::Q4 : DType::I8;
                const std::int64_t row_bytes = t->shape.back(), padded = q == DType::Q4 ? 2 * row_bytes : row_bytes;
                model::pack_lanes(q, base + (t->data - file->data()), t->numel() / row_bytes, padded, row_bytes);
            }
        });
        if (!done) continue;
        for (TensorInfo* t : mine) t->lane_packed = true;
        packed += mine.size();
    }
    return packed;
}

const TensorInfo* SafetensorsSet::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

std::size_t SafetensorsSet::total_bytes() const {
    std::size_t n = 0;
    for (const auto& [_, t] : tensors_) n += t.nbytes;
    return n;
}

}  // namespace inkling::model
