// The lane order of int8 weight rows: a load-time layout for the AVX-512 VNNI kernels.
//
// A row of int8 weights is blocks of 32 columns. In column order, one 64-byte vector holds two
// blocks, so `vpdpbusd` leaves each block's sum spread over eight 32-bit lanes, and bringing
// 16 blocks' sums together takes ~22 shuffles and adds (engine/cpu/int_kernels.cpp). In the
// lane order, each full group of 16 blocks (512 bytes) is stored word-transposed: the 4-byte
// word k (0-7) of block j (0-15) of a group sits at byte 64·k + 4·j of the group. Then lane j
// of every vector of the group belongs to block j, and eight `vpdpbusd` into one register
// leave the 16 block sums in block order with no reduction (session 21, one core over weights
// in L2: 58-62 -> 76 GB/s; two threads from memory: 0.67-0.75 -> 0.88-1.0 of the read loop).
// The last blocks of a row that do not fill a group of 16 stay in column order. The values
// are unchanged: only their places move.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/model/tensor.h"

namespace inkling::model {

inline constexpr std::int64_t kLaneBlock = 32;       // columns a block (quant::kBlock)
inline constexpr std::int64_t kLaneGroupBlocks = 16;  // blocks a group: a zmm's 32-bit lanes
inline constexpr std::int64_t kLaneGroupBytes = kLaneGroupBlocks * kLaneBlock;

// Columns of a row of `cols` that lie in full groups (the rest keep column order).
inline std::int64_t lane_grouped_cols(std::int64_t cols) {
    const std::int64_t blocks = (cols + kLaneBlock - 1) / kLaneBlock;
    return blocks / kLaneGroupBlocks * kLaneGroupBytes;
}

// Where column c of a lane-packed row of `cols` columns is stored (a byte offset in the row).
inline std::int64_t lane_offset(std::int64_t c, std::int64_t cols) {
    if (c >= lane_grouped_cols(cols)) return c;
    const std::int64_t group = c / kLaneGroupBytes * kLaneGroupBytes, in = c - group;
    const std::int64_t block = in / kLaneBlock, byte = in % kLaneBlock;
    return group + (byte / 4) * 64 + block * 4 + byte % 4;
}

// Rows (`row_bytes` apart, `cols` columns each) from column order to the lane order, in place.
void pack_int8_lanes(std::byte* data, std::int64_t rows, std::int64_t cols, std::int64_t row_bytes);
// The same order for `rows` rows of int8 values (activations) from `src` to `dst`.
void to_int8_lanes(const std::int8_t* src, std::int8_t* dst, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_bytes);

// The first `bytes` stored bytes of row r in column order, whichever order `m` keeps: what a
// device upload copies.
void copy_row_plain(const Matrix& m, std::int64_t r, std::byte* dst, std::size_t bytes);

}  // namespace inkling::model
