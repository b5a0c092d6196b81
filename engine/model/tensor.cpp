#include "engine/model/tensor.h"

#include "engine/model/lane_order.h"

#include <cmath>
#include <stdexcept>

namespace inkling::model {

const char* dtype_name(DType t) {
    switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::Q4: return "Q4";
    }
    return "?";
}

float f16_to_f32(std::uint16_t h) {
    int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    float value;
    if (exponent == 0) value = std::ldexp(static_cast<float>(mantissa), -24);
    else if (exponent == 31) value = mantissa ? NAN : INFINITY;
    else value = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
    return sign ? -value : value;
}

float Matrix::at(std::int64_t r, std::int64_t c) const {
    if (dtype == DType::I8) {
        const std::int64_t at = lane_packed ? lane_offset(dtype, c, cols) : c;
        return static_cast<float>(static_cast<std::int8_t>(row(r)[at])) * row_scales(r)[c / group];
    }
    if (dtype == DType::Q4) {
        const std::int64_t at = lane_packed ? lane_offset(dtype, c / 2, cols) : c / 2;
        const auto byte = static_cast<std::uint8_t>(row(r)[at]);
        const int nibble = (c % 2) ? byte >> 4 : byte & 0xf;
        return static_cast<float>(nibble >= 8 ? nibble - 16 : nibble) * row_scales(r)[c / group];
    }
    const std::byte* p = row(r) + static_cast<std::size_t>(c) * dtype_size(dtype);
    if (dtype == DType::F32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

void row_to_f32(const Matrix& m, std::int64_t r, float* out) {
    const std::byte* p = m.row(r);
    switch (m.dtype) {
    case DType::F32: std::memcpy(out, p, static_cast<std::size_t>(m.cols) * 4); break;
    case DType::BF16: {
        const auto* h = reinterpret_cast<const std::uint16_t*>(p);
        for (std::int64_t c = 0; c < m.cols; ++c) out[c] = bf16_to_f32(h[c]);
        break;
    }
    case DType::F16: {
        const auto* h = reinterpret_cast<const std::uint16_t*>(p);
        for (std::int64_t c = 0; c < m.cols; ++c) out[c] = f16_to_f32(h[c]);
        break;
    }
    case DType::I8:
    case DType::Q4:
        for (std::int64_t c = 0; c < m.cols; ++c) out[c] = m.at(r, c);
        break;
    case DType::U8: throw std::runtime_error("row_to_f32: raw U8 bytes are not a matrix");
    }
}

}  // namespace inkling::model
