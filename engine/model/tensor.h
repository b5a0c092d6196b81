// Views of weights that stay where they are (mmapped files): no copies, no upcasts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace inkling::model {

enum class DType { F32, BF16, F16 };

inline std::size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
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
struct Matrix {
    const std::byte* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t row_stride = 0;

    const std::byte* row(std::int64_t r) const {
        return data + static_cast<std::size_t>(r * row_stride) * dtype_size(dtype);
    }
    float at(std::int64_t r, std::int64_t c) const;
    // Rows [first, first+count) as a matrix of their own.
    Matrix slice_rows(std::int64_t first, std::int64_t count) const {
        return {row(first), dtype, count, cols, row_stride};
    }
    std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * dtype_size(dtype); }
};

// Converts one row into f32.
void row_to_f32(const Matrix& m, std::int64_t r, float* out);

}  // namespace inkling::model
