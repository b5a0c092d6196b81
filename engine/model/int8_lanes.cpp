#include "engine/model/int8_lanes.h"

#include <algorithm>
#include <cstring>

namespace inkling::model {
namespace {

// One group: word k of block j → word 16·k + j.
template <class T>
void transpose_group(const T* src, T* dst) {
    std::uint32_t in[kLaneGroupBytes / 4], out[kLaneGroupBytes / 4];
    std::memcpy(in, src, kLaneGroupBytes);
    for (std::int64_t j = 0; j < kLaneGroupBlocks; ++j)
        for (std::int64_t k = 0; k < kLaneBlock / 4; ++k) out[k * kLaneGroupBlocks + j] = in[j * (kLaneBlock / 4) + k];
    std::memcpy(dst, out, kLaneGroupBytes);
}

// The inverse: word 16·k + j → word k of block j.
void untranspose_group(const std::byte* src, std::byte* dst) {
    std::uint32_t in[kLaneGroupBytes / 4], out[kLaneGroupBytes / 4];
    std::memcpy(in, src, kLaneGroupBytes);
    for (std::int64_t j = 0; j < kLaneGroupBlocks; ++j)
        for (std::int64_t k = 0; k < kLaneBlock / 4; ++k) out[j * (kLaneBlock / 4) + k] = in[k * kLaneGroupBlocks + j];
    std::memcpy(dst, out, kLaneGroupBytes);
}

}  // namespace

void pack_int8_lanes(std::byte* data, std::int64_t rows, std::int64_t cols, std::int64_t row_bytes) {
    const std::int64_t grouped = lane_grouped_cols(cols);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < grouped; g += kLaneGroupBytes) {
            std::byte* p = data + r * row_bytes + g;
            transpose_group(p, p);
        }
}

void to_int8_lanes(const std::int8_t* src, std::int8_t* dst, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_bytes) {
    const std::int64_t grouped = lane_grouped_cols(cols);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int8_t* s = src + r * row_bytes;
        std::int8_t* d = dst + r * row_bytes;
        for (std::int64_t g = 0; g < grouped; g += kLaneGroupBytes) transpose_group(s + g, d + g);
        std::memcpy(d + grouped, s + grouped, static_cast<std::size_t>(row_bytes - grouped));
    }
}

void copy_row_plain(const Matrix& m, std::int64_t r, std::byte* dst, std::size_t bytes) {
    std::memcpy(dst, m.row(r), bytes);
    if (!m.lane_packed) return;
    const std::int64_t grouped = lane_grouped_cols(m.cols);
    for (std::int64_t g = 0; g + kLaneGroupBytes <= std::min<std::int64_t>(grouped, static_cast<std::int64_t>(bytes));
         g += kLaneGroupBytes)
        untranspose_group(m.row(r) + g, dst + g);
}

}  // namespace inkling::model
