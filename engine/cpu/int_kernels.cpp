// The generic integer kernels, the reference every per-ISA version reproduces bit for bit
// (int_kernels.h's pattern), and the dispatch: a kernel table per ISA (int_kernel_table.h),
// filled from x86/ or arm64/, and the loops of int_product_rows that pick its kernels.
#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/int_kernels.h"

#include "engine/cpu/int_kernel_table.h"
#if defined(__x86_64__)
#include "engine/cpu/x86/int_kernels.h"
#include "engine/model/lane_order.h"
#elif defined(__aarch64__)
#include "engine/cpu/arm64/int_kernels.h"
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

namespace inkling::cpu {
namespace {

using model::DType;
using model::Matrix;
constexpr std::int64_t kB = quant::kBlock;

using Blocks = IntBlocks;

// ---- generic: the reference every SIMD path reproduces bit for bit ---------------------
float finish16(float* acc) {
    for (int h = 8; h > 0; h /= 2)
        for (int i = 0; i < h; ++i) acc[i] = acc[i] + acc[i + h];
    return acc[0];
}

int q4_at(const std::uint8_t* w, std::int64_t i) {
    const int v = (i % 2) ? w[i / 2] >> 4 : w[i / 2] & 0xf;
    return v >= 8 ? v - 16 : v;
}

float dot_i8_scalar(const std::int8_t* w, const std::int8_t* x, const Blocks& k) {
    float acc[16] = {};
    for (std::int64_t b = 0; b < k.n; ++b) {
        std::int32_t isum = 0;
        for (std::int64_t i = b * kB; i < (b + 1) * kB; ++i) isum += std::int32_t{w[i]} * x[i];
        acc[b % 16] = std::fma(k.sw[b] * k.sx[b], static_cast<float>(isum), acc[b % 16]);
    }
    return finish16(acc);
}

// `x` in natural order.
float dot_q4_scalar(const std::uint8_t* w, const std::int8_t* x, const Blocks& k) {
    float acc[16] = {};
    for (std::int64_t b = 0; b < k.n; ++b) {
        std::int32_t isum = 0;
        for (std::int64_t i = b * kB; i < (b + 1) * kB; ++i) isum += q4_at(w, i) * x[i];
        acc[b % 16] = std::fma(k.sw[b] * k.sx[b], static_cast<float>(isum), acc[b % 16]);
    }
    return finish16(acc);
}

// A packed int4 row (`padded` values) as int8 in natural order.
void unpack_q4_scalar(const std::uint8_t* w, std::int64_t padded, std::int8_t* out) {
    for (std::int64_t i = 0; i < padded; ++i) out[i] = static_cast<std::int8_t>(q4_at(w, i));
}

// ---- dispatch ----------------------------------------------------------------------------
IntKernels int_kernels_for(Isa isa) {
#if defined(__x86_64__)
    static const bool vnni = has_avx512_vnni();
    if (isa == Isa::Avx512 && vnni)
        return {.dot_i8 = x86::dot_i8_vnni,
                .dot_q4 = x86::dot_q4_vnni,
                .unpack_q4 = x86::unpack_q4_avx2,
                .q4_order = true,
                .lanes = x86::lanes_vnni,
                .many_i8 = x86::kI8ManyVnni,
                .many_i8_row_scale = x86::kI8RowScaleManyVnni,
                .many_q4 = x86::kQ4ManyVnni,
                .many_q4_x4 = x86::kQ4X4ManyVnni,
                .many_i8_lanes = x86::kI8LanesManyVnni,
                .many_i8_lanes_row_scale = x86::kI8LanesRowScaleManyVnni,
                .many_q4_lanes = x86::kQ4LanesManyVnni,
                .name = "avx512-vnni"};
    if (isa == Isa::Avx2 || isa == Isa::Avx512)
        return {.dot_i8 = x86::dot_i8_avx2,
                .dot_q4 = x86::dot_q4_avx2,
                .unpack_q4 = x86::unpack_q4_avx2,
                .q4_order = true,
                .many_i8 = x86::kI8ManyAvx2,
                .many_i8_row_scale = x86::kI8RowScaleManyAvx2,
                .many_q4 = x86::kQ4ManyAvx2,
                .name = "avx2"};
#elif defined(__aarch64__)
    // (engine/cpu/arm64/int_kernels.h; a level this build could not compile is never the
    // active ISA: arm64::best_isa stops below it.)
    if (isa == Isa::I8mm)
        return {.dot_i8 = arm64::dot_i8_dotprod,
                .dot_q4 = arm64::dot_q4_dotprod,
                .unpack_q4 = unpack_q4_scalar,
                .q4_order = true,
                .tile_i8 = arm64::tile_i8_i8mm,
                .tile_q4 = arm64::tile_q4_i8mm,
                .name = "smmla+sdot"};
    if (isa == Isa::Dotprod)
        return {.dot_i8 = arm64::dot_i8_dotprod,
                .dot_q4 = arm64::dot_q4_dotprod,
                .unpack_q4 = unpack_q4_scalar,
                .q4_order = true,
                .name = "sdot"};
    if (isa == Isa::Neon)
        return {.dot_i8 = arm64::dot_i8_neon,
                .dot_q4 = arm64::dot_q4_neon,
                .unpack_q4 = unpack_q4_scalar,
                .q4_order = true,
                .name = "neon"};
#endif
    (void)isa;
    return {.dot_i8 = dot_i8_scalar,
            .dot_q4 = dot_q4_scalar,
            .unpack_q4 = unpack_q4_scalar,
            .q4_order = false,
            .name = "scalar"};
}

// Weight rows a block of the multi-row kernels holds (in L2) while every group of activation
// rows passes over it.
constexpr std::int64_t kWeightBlockBytes = 256 << 10;

// Without a multi-row kernel: from this many activation rows on, an int4 row is widened to
// int8 once and then dotted with every row (the nibble unpacking would otherwise repeat).
constexpr std::int64_t kUnpackFromRows = 3;

// From this many activation rows on, 16 weight rows go through lanes_vnni together: its tile
// of gathered weights pays off over the rows. Against the multi-row kernels (four rows a
// weight load, int4 in the x4 order; 2 threads, 14336 × 4096, Zen 4, two runs each, the
// threshold moved in a scratch build), lanes_vnni at 12 / 16 / 20 / 24 / 32
// / 48 rows: int8 87-94 / 134-154 / 167-188 / 213-215 / 220-246 / 259-298 GFLOP/s against
// 197 / 196-248 / 202-240 / 206-227 / 203-216 / 208-264; int4 184-186 / 209-222 / 224-240 /
// 241-250 / 264-281 / 278-384 against 289-294 / 303-309 / 285-361 / 212-362 / 213-364 /
// 214-372. Inkling-Small's routed experts see ~24 rows each in a 512-token prompt chunk.
constexpr std::int64_t kLanesFromRows = 24;

}  // namespace

bool has_avx512_vnni() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

const char* int_kernel_name(Isa isa) { return int_kernels_for(isa).name; }

bool lane_order_pays(Isa isa) { return int_kernels_for(isa).many_i8_lanes != nullptr; }

namespace {
std::atomic<bool> g_lane_order{true};
}
bool lane_order_active() { return g_lane_order.load() && lane_order_pays(active_isa()); }
void set_lane_order(bool on) { g_lane_order.store(on); }

#if defined(__x86_64__)
namespace {
// Rows in the q4 order → the x4 order rows_q4_x4_vnni reads: each row's full 16 blocks as
// four groups of [the four blocks' even elements, then their odd ones]; the last blocks
// (fewer than 16) stay in the q4 order, for the kernel's tail.
void to_x4_order(const platform::AlignedVector<std::int8_t>& q4, std::int64_t rows, std::int64_t padded,
                 platform::AlignedVector<std::int8_t>& x4) {
    x4.resize(q4.size());
    constexpr std::int64_t kHalf = kB / 2;
    const std::int64_t grouped = padded / kB / 16 * 16;  // blocks a row has in full 16s
    for (std::int64_t s = 0; s < rows; ++s) {
        const std::int8_t* row = q4.data() + s * padded;
        std::int8_t* out = x4.data() + s * padded;
        for (std::int64_t g = 0; g < grouped; g += 4)
            for (std::int64_t c = 0; c < 4; ++c) {
                const std::int8_t* src = row + (g + c) * kB;
                std::copy_n(src, kHalf, out + g * kB + c * kHalf);
                std::copy_n(src + kHalf, kHalf, out + g * kB + 4 * kHalf + c * kHalf);
            }
        std::copy(row + grouped * kB, row + padded, out + grouped * kB);  // the tail, as it is
    }
}
}  // namespace
#endif

void prepare_int_activations(Isa isa, bool q4_order, const float* x, std::int64_t rows, std::int64_t cols,
                             IntActivations& out) {
    const IntKernels k = int_kernels_for(isa);
    out.q4.clear();
    out.q4x4.clear();
    out.lanes.clear();
    out.q4_lanes.clear();
#if defined(__x86_64__)
    // The vectorized quantizers: VNNI's for its kernels, AVX2's for the AVX2 ones (AVX-512
    // without VNNI runs those too). q4 order where the kernels read it.
    const bool vnni = isa == Isa::Avx512 && has_avx512_vnni();
    if (vnni || isa == Isa::Avx2 || isa == Isa::Avx512) {
        quant::QuantizedActivations& a = out.a;
        a.rows = rows;
        a.cols = cols;
        a.padded = quant::padded_cols(cols);
        a.blocks = a.padded / kB;
        a.q.assign(static_cast<std::size_t>(rows * a.padded), 0);
        a.scales.resize(static_cast<std::size_t>(rows * a.blocks));
        a.sums.resize(static_cast<std::size_t>(rows * a.blocks));
        const bool q4 = q4_order && k.q4_order;
        if (q4) out.q4.assign(a.q.size(), 0);
        (vnni ? x86::quantize_vnni : x86::quantize_avx2)(x, rows, cols, a, q4 ? out.q4.data() : nullptr);
        // The x4 order for the rows that reach the multi-row kernels (below lanes_vnni's).
        if (q4 && rows < kLanesFromRows && k.many_q4_x4) to_x4_order(out.q4, rows, a.padded, out.q4x4);
        // The lane order, for lane-packed int8 weights (every row count: past lanes_vnni's 16
        // weight rows at a time, a matrix's last rows go through the multi-row kernels).
        if (k.many_i8_lanes) {
            out.lanes.resize(a.q.size());
            model::to_int8_lanes(a.q.data(), out.lanes.data(), rows, cols, a.padded);
        }
        if (q4 && k.many_q4_lanes) {
            out.q4_lanes.resize(a.q.size());
            model::to_int8_lanes(out.q4.data(), out.q4_lanes.data(), rows, cols, a.padded);
        }
        return;
    }
#endif
    quant::quantize_activations(x, rows, cols, out.a);
    if (!q4_order || !k.q4_order) return;
    out.q4.resize(out.a.q.size());
    const std::int64_t blocks = rows * out.a.blocks;
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int8_t* src = out.a.q.data() + b * kB;
        std::int8_t* dst = out.q4.data() + b * kB;
        for (std::int64_t i = 0; i < kB / 2; ++i) {
            dst[i] = src[2 * i];
            dst[kB / 2 + i] = src[2 * i + 1];
        }
    }
}

namespace {

// The weight scale of each block of row o: the row's scales as they are for groups of 32,
// else expanded into `slot` of the thread's buffer `buf`.
struct BlockScales {
    const Matrix& w;
    std::int64_t blocks;  // of a row
    std::vector<float>& buf;

    // Room in `buf` for `slots` expanded rows (none is needed for groups of 32).
    void reserve(std::int64_t slots) {
        if (w.group != kB && buf.size() < static_cast<std::size_t>(slots * blocks))
            buf.resize(static_cast<std::size_t>(slots * blocks));
    }
    const float* operator()(std::int64_t o, std::int64_t slot) const {
        const float* sw = w.row_scales(o);
        if (w.group == kB) return sw;
        float* out = buf.data() + slot * blocks;
        const std::int64_t per = w.group / kB;  // blocks a scale covers
        for (std::int64_t b = 0; b < blocks; b += per) std::fill_n(out + b, std::min(per, blocks - b), sw[b / per]);
        return static_cast<const float*>(out);
    }
};

// Many activation rows: weight rows [begin, end) 16 at a time, a lane each (lanes_vnni).
// Returns where it stopped: the last rows (fewer than 16) are left to the other loops.
std::int64_t lanes_rows(const IntKernels& k, const Matrix& w, const quant::QuantizedActivations& a,
                        const std::int8_t* xq, BlockScales& scales_of, std::int64_t begin, std::int64_t end, float* y) {
    const bool q4 = w.dtype == DType::Q4;
    const auto row_bytes = static_cast<std::int64_t>(model::dtype_bytes(w.dtype, w.row_stride));
    scales_of.reserve(kLanes);
    for (; begin + kLanes <= end; begin += kLanes) {
        const float* sw[kLanes];
        for (std::int64_t l = 0; l < kLanes; ++l) sw[l] = scales_of(begin + l, l);
        k.lanes(q4, w.lane_packed, reinterpret_cast<const std::uint8_t*>(w.row(begin)), row_bytes, sw, a, xq, w.rows,
                y + begin);
    }
    return begin;
}

// The multi-row kernels: a block of weight rows (kept in L2) meets every group of
// kRowsPerLoad activation rows (in L1) in turn; with few activation rows the weights stream
// once.
void many_rows(const IntKernels& k, const Matrix& w, const IntActivations& x, const std::int8_t* xq,
               BlockScales& scales_of, std::int64_t begin, std::int64_t end, float* y) {
    const quant::QuantizedActivations& a = x.a;
    const bool q4 = w.dtype == DType::Q4;
    const auto row_bytes = static_cast<std::int64_t>(model::dtype_bytes(w.dtype, w.row_stride));
    const std::int64_t block = std::max<std::int64_t>(1, kWeightBlockBytes / std::max<std::int64_t>(1, row_bytes));
    const bool row_scale = !q4 && k.many_i8_row_scale && w.group >= a.padded;
    if (!row_scale) scales_of.reserve(block);
    std::vector<const float*>& sws = thread_scratch<const float*, struct sws_scratch>();
    sws.resize(static_cast<std::size_t>(block));
    // The kernels, and the order of the activations they read: lane-packed weights meet
    // activations in the lane order (int4: the q4 order's values); int4 in column order
    // the x4 order's kernels where there are some (the same bits).
    const std::int8_t* xr = xq;
    const ManyFn* many = q4 ? k.many_q4 : row_scale ? k.many_i8_row_scale : k.many_i8;
    if (w.lane_packed) {
        xr = q4 ? x.q4_lanes.data() : x.lanes.data();
        many = q4 ? k.many_q4_lanes : row_scale ? k.many_i8_lanes_row_scale : k.many_i8_lanes;
    } else if (q4 && !x.q4x4.empty()) {
        xr = x.q4x4.data();
        many = k.many_q4_x4;
    }
    for (std::int64_t ob = begin; ob < end; ob += block) {
        const std::int64_t oe = std::min(end, ob + block);
        for (std::int64_t o = ob; o < oe; ++o)
            sws[static_cast<std::size_t>(o - ob)] = row_scale ? w.row_scales(o) : scales_of(o, o - ob);
        for (std::int64_t s = 0; s < a.rows; s += kRowsPerLoad) {
            const int r = static_cast<int>(std::min<std::int64_t>(kRowsPerLoad, a.rows - s));
            const std::int8_t* xs[kRowsPerLoad];
            Blocks blocks[kRowsPerLoad];
            for (int i = 0; i < r; ++i) xs[i] = xr + (s + i) * a.padded;
            for (int i = 0; i < r; ++i)
                blocks[i] = {a.sums.data() + (s + i) * a.blocks, nullptr, a.scales.data() + (s + i) * a.blocks,
                             a.blocks};
            // The block's weight rows in one call (the kernels' many_* loops).
            many[r - 1](reinterpret_cast<const std::uint8_t*>(w.row(ob)), row_bytes, oe - ob, xs, blocks, sws.data(),
                        y + s * w.rows + ob, w.rows);
        }
    }
}

// Weight rows in pairs against activation rows in pairs (IntKernels::tile_*); a last odd
// activation row goes through dot_*. Returns where it stopped: a last odd weight row is left
// to one_rows.
std::int64_t tile_rows(const IntKernels& k, TileFn tile, const Matrix& w, const IntActivations& x,
                       const BlockScales& scales_of, std::int64_t begin, std::int64_t end, float* y) {
    const quant::QuantizedActivations& a = x.a;
    const bool q4 = w.dtype == DType::Q4;
    const std::int8_t* xt = q4 ? x.q4.data() : a.q.data();
    auto blocks_of = [&](std::int64_t s, const float* sw) {
        return Blocks{a.sums.data() + s * a.blocks, sw, a.scales.data() + s * a.blocks, a.blocks};
    };
    for (; begin + 2 <= end; begin += 2) {
        const std::int64_t o = begin;
        const float* sw[2] = {scales_of(o, 0), scales_of(o + 1, 1)};
        const std::uint8_t* ws[2] = {reinterpret_cast<const std::uint8_t*>(w.row(o)),
                                     reinterpret_cast<const std::uint8_t*>(w.row(o + 1))};
        std::int64_t s = 0;
        for (; s + 2 <= a.rows; s += 2) {
            const std::int8_t* xs[2] = {xt + s * a.padded, xt + (s + 1) * a.padded};
            const Blocks kb[4] = {blocks_of(s, sw[0]), blocks_of(s + 1, sw[0]), blocks_of(s, sw[1]),
                                  blocks_of(s + 1, sw[1])};
            float out[4];
            tile(ws, xs, kb, out);
            y[s * w.rows + o] = out[0];
            y[(s + 1) * w.rows + o] = out[1];
            y[s * w.rows + o + 1] = out[2];
            y[(s + 1) * w.rows + o + 1] = out[3];
        }
        for (; s < a.rows; ++s)
            for (int r = 0; r < 2; ++r)
                y[s * w.rows + o + r] = q4 ? k.dot_q4(ws[r], xt + s * a.padded, blocks_of(s, sw[r]))
                                           : k.dot_i8(reinterpret_cast<const std::int8_t*>(ws[r]),
                                                      xt + s * a.padded, blocks_of(s, sw[r]));
    }
    return begin;
}

// One weight row against one activation row at a time (dot_*); with `unpack`, each int4
// row widened to int8 once for all the activation rows.
void one_rows(const IntKernels& k, const Matrix& w, const quant::QuantizedActivations& a, const std::int8_t* xq,
              bool unpack, const BlockScales& scales_of, std::int64_t begin, std::int64_t end, float* y) {
    const bool q4 = w.dtype == DType::Q4;
    std::vector<std::int8_t>& row_buf = thread_scratch<std::int8_t, struct row_buf_scratch>();
    if (unpack && row_buf.size() < static_cast<std::size_t>(a.padded)) row_buf.resize(static_cast<std::size_t>(a.padded));
    for (std::int64_t o = begin; o < end; ++o) {
        const float* sw = scales_of(o, 0);
        const auto* row = reinterpret_cast<const std::uint8_t*>(w.row(o));
        if (unpack) k.unpack_q4(row, a.padded, row_buf.data());
        for (std::int64_t s = 0; s < a.rows; ++s) {
            const Blocks blocks{a.sums.data() + s * a.blocks, sw, a.scales.data() + s * a.blocks, a.blocks};
            float& out = y[s * w.rows + o];
            if (!q4) out = k.dot_i8(reinterpret_cast<const std::int8_t*>(row), xq + s * a.padded, blocks);
            else if (unpack) out = k.dot_i8(row_buf.data(), xq + s * a.padded, blocks);
            else out = k.dot_q4(row, xq + s * a.padded, blocks);
        }
    }
}

}  // namespace

void int_product_rows(Isa isa, const Matrix& w, const IntActivations& x, std::int64_t begin, std::int64_t end,
                      float* y) {
    const quant::QuantizedActivations& a = x.a;
    if (!model::is_quantized(w.dtype) || a.cols != w.cols || w.row_stride < a.padded || w.group <= 0 ||
        w.group % kB != 0)
        throw std::runtime_error(std::string("int_product_rows: bad ") + model::dtype_name(w.dtype) + " matrix [" +
                                 std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] (stride " +
                                 std::to_string(w.row_stride) + ", group " + std::to_string(w.group) +
                                 ") for activations of " + std::to_string(a.cols) + " columns");
    const IntKernels k = int_kernels_for(isa);
    const bool q4 = w.dtype == DType::Q4;
    if (w.lane_packed && !k.many_i8_lanes)
        throw std::logic_error(std::string("int_product_rows: lane-packed ") + model::dtype_name(w.dtype) +
                               " weights, which the " + k.name + " kernels do not read (the loader packs "
                               "integer weights so only for AVX-512 VNNI: cpu::lane_order_pays)");
    const ManyFn* multi = q4 ? k.many_q4 : k.many_i8;
    if (multi && q4 && x.q4.empty()) throw std::runtime_error("int_product_rows: int4 weights need the q4 order");
    const bool unpack = !multi && q4 && a.rows >= kUnpackFromRows;
    const std::int8_t* xq = q4 && !unpack && k.q4_order ? x.q4.data() : a.q.data();
    BlockScales scales_of{w, a.blocks, thread_scratch<float, struct sw_buf_scratch>()};
    if (multi && k.lanes && a.rows >= kLanesFromRows && end - begin >= kLanes) {
        begin = lanes_rows(k, w, a, xq, scales_of, begin, end, y);
        if (begin == end) return;
    }
    if (w.lane_packed && (q4 ? x.q4_lanes : x.lanes).empty())
        throw std::logic_error(std::string("int_product_rows: lane-packed ") + model::dtype_name(w.dtype) +
                               " weights need the activations' lane order (prepare_int_activations with the same "
                               "ISA gives it" + (q4 ? ", in the q4 order)" : ")"));
    if (multi) return many_rows(k, w, x, xq, scales_of, begin, end, y);
    scales_of.reserve(2);
    const TileFn tile = q4 ? k.tile_q4 : k.tile_i8;
    if (tile && a.rows >= 2) begin = tile_rows(k, tile, w, x, scales_of, begin, end, y);
    one_rows(k, w, a, xq, unpack, scales_of, begin, end, y);
}

}  // namespace inkling::cpu
