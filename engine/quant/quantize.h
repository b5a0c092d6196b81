// Symmetric integer quantization of weights (int8 per row, int4 per group) and of
// activations (int8 per block of 32), as docs/container.md specifies. The converter writes
// what these produce; the integer kernels (engine/cpu) read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/tensor.h"
#include "platform/aligned_vector.h"

namespace inkling::quant {

inline constexpr std::int64_t kBlock = 32;  // activation block; weight groups are multiples

inline std::int64_t padded_cols(std::int64_t cols) { return (cols + kBlock - 1) / kBlock * kBlock; }

// A quantized [rows][cols] matrix that owns its bytes: `data` holds rows of `padded` values
// (int8, or int4 packed two a byte), `scales` [rows][groups].
struct QuantizedMatrix {
    model::DType dtype = model::DType::I8;  // I8 or Q4
    std::int64_t rows = 0, cols = 0, padded = 0, group = 0, groups = 0;
    std::vector<std::byte> data;
    std::vector<float> scales;

    model::Matrix view() const;  // borrows data and scales
};

// int8, one scale a row (group = padded). `w` is [rows][cols] f32, row-major.
QuantizedMatrix quantize_int8_rows(const float* w, std::int64_t rows, std::int64_t cols);
// int4 in groups of `group` columns (a multiple of 32).
QuantizedMatrix quantize_int4_groups(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t group);

// The same, writing into caller-owned memory laid out as a Matrix would read it (row stride
// `padded` values, scales [rows][groups]): the converter fills container records in place.
void quantize_int8_rows_into(const float* w, std::int64_t rows, std::int64_t cols, std::byte* data, float* scales);
void quantize_int4_groups_into(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t group,
                               std::byte* data, float* scales);

// Activations: `rows` rows of `cols` floats → int8 blocks of 32 (zero-padded to
// padded_cols(cols)) with one f32 scale per block.
struct QuantizedActivations {
    std::int64_t rows = 0, cols = 0, padded = 0, blocks = 0;
    platform::AlignedVector<std::int8_t> q;  // [rows][padded], rows on 32-byte steps from a cache line
    std::vector<float> scales;     // [rows][blocks]
    // Σ of each block's q values, [rows][blocks] (for kernels that use unsigned×signed
    // instructions and correct by an offset).
    std::vector<std::int32_t> sums;
};
// s = max|x| / 127 per block, q = round(x / s) (a division, ties away from zero; weights
// likewise divide by their scale), s = 0 and q = 0 for an all-zero block. `out` is
// resized, its storage kept across calls.
void quantize_activations(const float* x, std::int64_t rows, std::int64_t cols, QuantizedActivations& out);

// ‖a − b‖₂ / ‖a‖₂ in double (0 when a is all zeros and so is b; infinity when only a is).
double relative_l2(const float* a, const float* b, std::int64_t n);

}  // namespace inkling::quant
