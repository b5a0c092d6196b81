// The lane order of integer weight rows: a load-time layout for the AVX-512 VNNI kernels.
//
// A row of int8 or int4 weights is blocks of 32 columns (32 bytes int8, 16 bytes int4). In
// column order, a 64-byte vector holds two int8 blocks or four int4 ones, so `vpdpbusd`
// leaves each block's sum spread over eight (int8) or four (int4) 32-bit lanes, and bringing
// 16 blocks' sums together takes shuffles and adds: ~22 operations int8, ~10 int4
// (engine/cpu/x86/int_kernels_avx512.cpp). In the lane order, each full group of 16 blocks is stored
// word-transposed: the 4-byte word k of block j of a group sits at byte 64·k + 4·j of the
// group. Then lane j of every vector of the group belongs to block j, and the `vpdpbusd` of a
// group (eight int8; four int4, each twice: low and high nibbles) add up the 16 block sums in
// block order with no reduction. Zen 4, int8: one core over weights in L2 77-78 GB/s against
// 65-67 in column order (a standalone harness); two threads from memory 0.88-1.04 of the read
// loop against 0.73-0.96 (`inkling bench --kernels --lane-order auto|off`,
// docs/performance.md). The last blocks of a row that do not fill a group of 16 stay in
// column order. The values are unchanged: only their places move.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/model/tensor.h"

namespace inkling::model {

inline constexpr std::int64_t kLaneBlockCols = 32;    // columns a block (quant::kBlock)
inline constexpr std::int64_t kLaneGroupBlocks = 16;  // blocks a group: a zmm's 32-bit lanes

// Bytes a block of `t` (I8 or Q4) takes.
inline std::int64_t lane_block_bytes(DType t) { return t == DType::Q4 ? kLaneBlockCols / 2 : kLaneBlockCols; }

// Bytes at the start of a row of `cols` columns of `t` that lie in full groups (the rest keep
// column order).
inline std::int64_t lane_grouped_bytes(DType t, std::int64_t cols) {
    const std::int64_t blocks = (cols + kLaneBlockCols - 1) / kLaneBlockCols;
    return blocks / kLaneGroupBlocks * kLaneGroupBlocks * lane_block_bytes(t);
}

// Where byte `at` of a row (of `cols` columns of `t`, in column order) is stored in the lane
// order.
inline std::int64_t lane_offset(DType t, std::int64_t at, std::int64_t cols) {
    if (at >= lane_grouped_bytes(t, cols)) return at;
    const std::int64_t bb = lane_block_bytes(t), group_bytes = kLaneGroupBlocks * bb;
    const std::int64_t group = at / group_bytes * group_bytes, in = at - group;
    const std::int64_t block = in / bb, byte = in % bb;
    return group + (byte / 4) * 64 + block * 4 + byte % 4;
}

// Rows (`row_bytes` apart, `cols` columns of `t` each) from column order to the lane order, in
// place.
void pack_lanes(DType t, std::byte* data, std::int64_t rows, std::int64_t cols, std::int64_t row_bytes);
// The same order for `rows` rows of int8 values (activations, or their q4 order) from `src`
// to `dst`, rows `row_bytes` apart.
void to_int8_lanes(const std::int8_t* src, std::int8_t* dst, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_bytes);

// The first `bytes` stored bytes of row r in column order, whichever order `m` keeps: what a
// device upload copies.
void copy_row_plain(const Matrix& m, std::int64_t r, std::byte* dst, std::size_t bytes);

}  // namespace inkling::model
