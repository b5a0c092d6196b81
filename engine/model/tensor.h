// Views of weights that stay where they are (mmapped files): no copies, no upcasts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace inkling::model {

// F32/BF16/F16: plain floats. I8: int8 weights with f32 scales (a Matrix) or raw int8 (a
// safetensors tensor). U8: raw bytes in a safetensors file (how packed int4 is stored).
// Q4: int4 weights packed two per byte (element 2j in the low nibble of byte j, 2j+1 in
// the high one, two's complement) with f32 scales. docs/container.md has the scheme.
enum class DType { F32, BF16, F16, I8, U8, Q4 };

// Bytes of `elements` consecutive elements (Q4: two per byte; `elements` is even).
inline std::size_t dtype_bytes(DType t, std::int64_t elements) {
    const auto n = static_cast<std::size_t>(elements);
    switch (t) {
    case DType::F32: return n * 4;
    case DType::BF16:
    case DType::F16: return n * 2;
    case DType::I8:
    case DType::U8: return n;
    case DType::Q4: return n / 2;
    }
    return 0;
}
inline std::size_t dtype_size(DType t) { return dtype_bytes(t, 2) / 2; }  // 0 for Q4
inline bool is_quantized(DType t) { return t == DType::I8 || t == DType::Q4; }
const char* dtype_name(DType t);

inline float bf16_to_f32(std::uint16_t h) {
    std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
float f16_to_f32(std::uint16_t h);

// A row-major matrix [rows, cols] inside some mapped buffer. `row_stride` (in elements)
// may exceed `cols`: release checkpoints interleave gate and up rows, and a view with
// stride 2·cols picks one of them without a copy.
//
// Quantized matrices (I8, Q4) keep rows padded with zeros to a multiple of 32 columns
// (row_stride = that padded width) and carry f32 scales: `scales` is [rows][groups] with
// `scale_stride` floats a row, each scale covering `group` columns (a multiple of 32;
// per-row int8 has group = row_stride, one scale a row). w[r][c] = q[r][c]·scale[r][c/group].
struct Matrix {
    const std::byte* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t row_stride = 0;
    const float* scales = nullptr;   // quantized only
    std::int64_t group = 0;          // columns per scale (quantized only)
    std::int64_t scale_stride = 0;   // floats per row of `scales`
    // I8 and Q4: each row's bytes in the lane order (engine/model/lane_order.h) rather than
    // column order — what AVX-512 VNNI's kernels read without a reduction. Views and
    // slices keep it; Matrix::at, row_to_f32 and copy_row_plain read either order.
    bool lane_packed = false;

    const std::byte* row(std::int64_t r) const { return data + dtype_bytes(dtype, r * row_stride); }
    const float* row_scales(std::int64_t r) const { return scales + r * scale_stride; }
    float at(std::int64_t r, std::int64_t c) const;
    // Rows [first, first+count) as a matrix of their own.
    Matrix slice_rows(std::int64_t first, std::int64_t count) const {
        Matrix m = *this;
        m.data = row(first);
        m.rows = count;
        if (scales) m.scales = row_scales(first);
        return m;
    }
    // Bytes a full pass reads: the weights as stored (padding included) and the scales.
    std::size_t bytes() const {
        if (!is_quantized(dtype)) return dtype_bytes(dtype, rows * cols);
        return dtype_bytes(dtype, rows * row_stride) + static_cast<std::size_t>(rows * scale_stride) * 4;
    }
};

// Converts one row into f32.
void row_to_f32(const Matrix& m, std::int64_t r, float* out);

}  // namespace inkling::model
