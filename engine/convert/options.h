// What `inkling convert SRC DST` was asked to do (docs/convert.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/experts/container_format.h"

namespace inkling::convert {

// The matrices outside the routed experts: as in SRC, int8 per row, or int4 in groups of 64.
enum class DenseMode { Keep, Int8, Int4g64 };
DenseMode parse_dense_mode(const std::string& name);  // throws std::invalid_argument
const char* dense_mode_name(DenseMode m);             // "keep", "int8", "int4g64"

struct Options {
    std::filesystem::path src, dst;
    experts::Format experts = experts::Format::Int4;
    DenseMode dense = DenseMode::Keep;
    bool keep_audio = false;
    bool restart = false;  // discard an unfinished or finished conversion in DST
    unsigned threads = 0;  // experts converted at once; 0 = one a core
    // Tests only: after this many expert records, save the resume state, write half of the
    // next record and die by SIGKILL, as an interrupted run would. Negative: off.
    std::int64_t fault_stop_after_records = -1;

    // What a resumed run must agree on (the fault hook and --restart are not part of it).
    nlohmann::json output_options() const;
};

inline constexpr std::int64_t kExpertGroup = 32;  // int4 expert group size (docs/container.md)
inline constexpr std::int64_t kDenseInt4Group = 64;

}  // namespace inkling::convert
