#include "engine/model/lane_order.h"

#include <algorithm>
#include <cstring>

namespace inkling::model {
namespace {

constexpr std::int64_t kMaxGroupWords = kLaneGroupBlocks * kLaneBlockCols / 4;

// One group of 16 blocks of `words` 4-byte words each: word k of block j → word 16·k + j
// (`inverse`: back).
void transpose_group(const void* src, void* dst, std::int64_t words, bool inverse) {
    std::uint32_t in[kMaxGroupWords], out[kMaxGroupWords];
    const auto bytes = static_cast<std::size_t>(kLaneGroupBlocks * words * 4);
    std::memcpy(in, src, bytes);
    for (std::int64_t j = 0; j < kLaneGroupBlocks; ++j)
        for (std::int64_t k = 0; k < words; ++k) {
            const std::int64_t plain = j * words + k, lanes = k * kLaneGroupBlocks + j;
            if (inverse) out[plain] = in[lanes];
            else out[lanes] = in[plain];
        }
    std::memcpy(dst, out, bytes);
}

}  // namespace

void pack_lanes(DType t, std::byte* data, std::int64_t rows, std::int64_t cols, std::int64_t row_bytes) {
    const std::int64_t grouped = lane_grouped_bytes(t, cols), words = lane_block_bytes(t) / 4;
    const std::int64_t group_bytes = kLaneGroupBlocks * lane_block_bytes(t);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < grouped; g += group_bytes) {
            std::byte* p = data + r * row_bytes + g;
            transpose_group(p, p, words, false);
        }
}

void to_int8_lanes(const std::int8_t* src, std::int8_t* dst, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_bytes) {
    const std::int64_t grouped = lane_grouped_bytes(DType::I8, cols), group_bytes = kLaneGroupBlocks * kLaneBlockCols;
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int8_t* s = src + r * row_bytes;
        std::int8_t* d = dst + r * row_bytes;
        for (std::int64_t g = 0; g < grouped; g += group_bytes) transpose_group(s + g, d + g, kLaneBlockCols / 4, false);
        std::memcpy(d + grouped, s + grouped, static_cast<std::size_t>(row_bytes - grouped));
    }
}

void copy_row_plain(const Matrix& m, std::int64_t r, std::byte* dst, std::size_t bytes) {
    std::memcpy(dst, m.row(r), bytes);
    if (!m.lane_packed) return;
    const std::int64_t grouped = std::min<std::int64_t>(lane_grouped_bytes(m.dtype, m.cols), static_cast<std::int64_t>(bytes));
    const std::int64_t words = lane_block_bytes(m.dtype) / 4, group_bytes = kLaneGroupBlocks * lane_block_bytes(m.dtype);
    for (std::int64_t g = 0; g + group_bytes <= grouped; g += group_bytes)
        transpose_group(m.row(r) + g, dst + g, words, true);
}

}  // namespace inkling::model
