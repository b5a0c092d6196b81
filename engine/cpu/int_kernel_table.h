// The integer kernel table: what one ISA's integer kernels give int_product_rows
// (engine/cpu/int_kernels.cpp picks a table per ISA). The generic kernels, x86's (x86/) and
// ARM64's (arm64/) each fill one; every kernel gives the generic version's bits
// (int_kernels.h's pattern). The required slots have no default; an optional slot left out
// is null, and int_product_rows then takes the path that needs none.
#pragma once

#include <cstdint>

#include "engine/cpu/int_blocks.h"
#include "engine/quant/quantize.h"

namespace inkling::cpu {

// The multi-row kernels (AVX-512 VNNI's): one weight row against up to kRowsPerLoad
// activation rows. Activation rows a weight row meets at once (the p[R][8] sums of R = 4 fill
// 32 zmm only briefly). Two weight rows against one activation row (two streams in flight at
// decode) measured no faster for int8 and 20–30 % slower for int4, so decode is R = 1.
constexpr int kRowsPerLoad = 4;
// Weight rows lanes_vnni takes at once (a zmm of int32 lanes).
constexpr std::int64_t kLanes = 16;

// One weight row · one activation row (w int8, or packed int4 bytes).
using DotI8Fn = float (*)(const std::int8_t*, const std::int8_t*, const IntBlocks&);
using DotQ4Fn = float (*)(const std::uint8_t*, const std::int8_t*, const IntBlocks&);
// A packed int4 row (its padded count of values) as int8 in natural order.
using UnpackQ4Fn = void (*)(const std::uint8_t*, std::int64_t, std::int8_t*);
// 2 weight rows × 2 activation rows at once (SMMLA): the four outputs [w0·x0, w0·x1, w1·x0,
// w1·x1], each as the dot_* slots give it (the blocks in that order too).
using TileFn = void (*)(const std::uint8_t* const*, const std::int8_t* const*, const IntBlocks*, float*);
// 16 weight rows a lane against every activation row (lanes_vnni): q4, lane-packed weights,
// the first weight row, a row's bytes, each row's block scales, the activations, their values
// in the order the weights want, y's row stride, y.
using LanesFn = void (*)(bool, bool, const std::uint8_t*, std::int64_t, const float* const*,
                         const quant::QuantizedActivations&, const std::int8_t*, std::int64_t, float*);
// Consecutive weight rows (the stride in bytes, their count) against R activation rows (R the
// table slot + 1), the weight rows' scales one pointer each (IntBlocks::sw ignored): the
// output of weight row i and activation row r at y[r · y_stride + i].
using ManyFn = void (*)(const std::uint8_t*, std::int64_t, std::int64_t, const std::int8_t* const*,
                        const IntBlocks*, const float* const*, float*, std::int64_t);

struct IntKernels {
    // Required.
    DotI8Fn dot_i8;
    DotQ4Fn dot_q4;  // x in the q4 order if q4_order, else in natural order
    UnpackQ4Fn unpack_q4;
    bool q4_order;
    // Optional: 2 weight rows × 2 activation rows at once; the rows it leaves (an odd one) go
    // through dot_*.
    TileFn tile_i8 = nullptr;
    TileFn tile_q4 = nullptr;
    // Optional: 16 weight rows a lane against every activation row.
    LanesFn lanes = nullptr;
    // Optional: several activation rows per weight load (1..kRowsPerLoad, the array's index
    // + 1), over a block of weight rows a call: int8; int8 rows of one scale (passed as
    // IntBlocks::sw[0]: the same sums as a per-block array of equal scales); int4 with x in
    // the q4 order; int4 with x in the x4 order (rows_q4_x4_vnni).
    const ManyFn* many_i8 = nullptr;
    const ManyFn* many_i8_row_scale = nullptr;
    const ManyFn* many_q4 = nullptr;
    const ManyFn* many_q4_x4 = nullptr;
    // Optional: the same for lane-packed weights (x in the lane order): int8 per-block and
    // one-scale rows, int4 (x the q4 order's values in the lane order); null where the set
    // cannot read the lane order (lane_order_pays).
    const ManyFn* many_i8_lanes = nullptr;
    const ManyFn* many_i8_lanes_row_scale = nullptr;
    const ManyFn* many_q4_lanes = nullptr;
    // Required: int_kernel_name's answer ("scalar", "avx2", "avx512-vnni", "neon", …).
    const char* name;
};

}  // namespace inkling::cpu
