#include "engine/model/lane_order.h"

#include <algorithm>
#include <cstring>

namespace inkling::model {
namespace {

// One group of 16 blocks of W 4-byte words each: word k of block j → word 16·k + j (`Inverse`:
// back). The fixed shape lets the compiler unroll it (one Zen 4 core packing rows: 4.5 → 7.0
// GB/s int8, 3.8 → 8.1 int4, against loops over a run-time word count): a 3 MB expert record
// costs its I/O thread ~0.4 ms after the read.
template <int W, bool Inverse>
void transpose_group(const void* src, void* dst) {
    std::uint32_t in[kLaneGroupBlocks * W], out[kLaneGroupBlocks * W];
    std::memcpy(in, src, sizeof in);
    for (int j = 0; j < kLaneGroupBlocks; ++j)
        for (int k = 0; k < W; ++k) {
            if constexpr (Inverse) out[j * W + k] = in[k * kLaneGroupBlocks + j];
            else out[k * kLaneGroupBlocks + j] = in[j * W + k];
        }
    std::memcpy(dst, out, sizeof out);
}

template <bool Inverse>
void transpose_group(DType t, const void* src, void* dst) {
    if (t == DType::Q4) transpose_group<kLaneBlockCols / 8, Inverse>(src, dst);
    else transpose_group<kLaneBlockCols / 4, Inverse>(src, dst);
}

}  // namespace

void pack_lanes(DType t, std::byte* data, std::int64_t rows, std::int64_t cols, std::int64_t row_bytes) {
    const std::int64_t grouped = lane_grouped_bytes(t, cols), group_bytes = kLaneGroupBlocks * lane_block_bytes(t);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < grouped; g += group_bytes) {
            std::byte* p = data + r * row_bytes + g;
            transpose_group<false>(t, p, p);
        }
}

void to_int8_lanes(const std::int8_t* src, std::int8_t* dst, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_bytes) {
    const std::int64_t grouped = lane_grouped_bytes(DType::I8, cols), group_bytes = kLaneGroupBlocks * kLaneBlockCols;
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int8_t* s = src + r * row_bytes;
        std::int8_t* d = dst + r * row_bytes;
        for (std::int64_t g = 0; g < grouped; g += group_bytes) transpose_group<false>(DType::I8, s + g, d + g);
        std::memcpy(d + grouped, s + grouped, static_cast<std::size_t>(row_bytes - grouped));
    }
}

void copy_row_plain(const Matrix& m, std::int64_t r, std::byte* dst, std::size_t bytes) {
    std::memcpy(dst, m.row(r), bytes);
    if (!m.lane_packed) return;
    const std::int64_t grouped = std::min<std::int64_t>(lane_grouped_bytes(m.dtype, m.cols), static_cast<std::int64_t>(bytes));
    const std::int64_t group_bytes = kLaneGroupBlocks * lane_block_bytes(m.dtype);
    for (std::int64_t g = 0; g + group_bytes <= grouped; g += group_bytes) transpose_group<true>(m.dtype, m.row(r) + g, dst + g);
}

}  // namespace inkling::model
