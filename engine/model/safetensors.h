// safetensors files through mmap: one file, a sharded set with model.safetensors.index.json,
// and any sidecar (audio.safetensors) in the same folder. Headers are validated fully
// (dtype known, offsets inside the file, byte length = shape × dtype size) before any
// tensor is handed out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/tensor.h"

namespace inkling::model {

struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const std::byte* data = nullptr;
    std::size_t nbytes = 0;
    std::string file;
    // int8 or int4 weights moved into the lane order (SafetensorsSet::pack_lane_order).
    bool lane_packed = false;

    std::int64_t numel() const;
    std::string shape_text() const;  // "[4, 64]"
};

class MappedFile;

// Where a model's safetensors bytes live (`--load-weights`). Map: the files mapped — the page
// cache, shared between processes, paged in and out by the OS. Copy: read into the engine's
// own memory on huge pages (platform::FileBacking::Copy). Auto: Copy when the OS offers huge
// pages and the files take at most half the memory available, else Map.
enum class WeightsMemory { Auto, Map, Copy };
WeightsMemory parse_weights_memory(const std::string& text);  // "auto", "map", "copy"; throws naming it

class SafetensorsSet {
public:
    // Every *.safetensors file in `dir` (all shards the index names must exist), held as
    // `memory` says. Throws std::runtime_error naming the file and the problem.
    static SafetensorsSet open_dir(const std::filesystem::path& dir, WeightsMemory memory = WeightsMemory::Map);
    // One file, for tests and tools.
    static SafetensorsSet open_file(const std::filesystem::path& file);

    const TensorInfo* find(const std::string& name) const;
    const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
    std::size_t total_bytes() const;
    // Whether the files were copied into memory (WeightsMemory::Copy, or Auto's choice).
    bool copied() const { return copied_; }
    // Every int8 or int4 weight matrix (an I8 or U8 tensor beside its NAME.scales:
    // docs/container.md) moved
    // into the lane order of engine/model/lane_order.h in place, and marked so
    // (TensorInfo::lane_packed) for the views bound from it — for kernels that read that
    // order (cpu::lane_order_pays). Only a copied set is packed: a mapping is the file's own
    // bytes. Returns how many tensors it packed.
    std::size_t pack_lane_order();

private:
    void add_file(const std::filesystem::path& file, bool copy = false);
    bool copied_ = false;
    std::vector<std::shared_ptr<MappedFile>> files_;
    std::map<std::string, TensorInfo> tensors_;
};

}  // namespace inkling::model
