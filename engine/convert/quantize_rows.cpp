#include "engine/convert/quantize_rows.h"

#include <algorithm>
#include <vector>

#include "engine/quant/quantize.h"

namespace inkling::convert {
namespace {

// w = q·scale, as model::Matrix::at reads it, a row at a time (at() per element would
// be half of the converter's time).
void dequantize_row(const Scheme& scheme, const std::byte* q, const float* scales, std::int64_t cols, float* out) {
    if (scheme.dtype == model::DType::I8) {
        const auto* v = reinterpret_cast<const std::int8_t*>(q);
        for (std::int64_t c = 0; c < cols; ++c) out[c] = static_cast<float>(v[c]) * scales[0];
        return;
    }
    // Two's-complement nibble → int: (n ^ 8) - 8. Groups and pairs start on even columns.
    auto value = [](unsigned nibble) { return static_cast<float>(static_cast<int>(nibble ^ 8u) - 8); };
    for (std::int64_t c0 = 0; c0 < cols; c0 += scheme.group) {
        const float s = scales[c0 / scheme.group];
        const std::int64_t end = std::min(cols, c0 + scheme.group);
        for (std::int64_t c = c0; c < end; c += 2) {
            const auto byte = static_cast<unsigned>(q[c / 2]);
            out[c] = value(byte & 0xfu) * s;
            if (c + 1 < end) out[c + 1] = value(byte >> 4) * s;
        }
    }
}

}  // namespace

std::string Scheme::name() const {
    return dtype == model::DType::I8 ? "int8" : "int4g" + std::to_string(group);
}

std::int64_t Scheme::padded(std::int64_t cols) const { return quant::padded_cols(cols); }

std::int64_t Scheme::groups(std::int64_t cols) const {
    return dtype == model::DType::I8 ? 1 : (padded(cols) + group - 1) / group;
}

std::int64_t Scheme::row_bytes(std::int64_t cols) const {
    return static_cast<std::int64_t>(model::dtype_bytes(dtype, padded(cols)));
}

Scheme dense_scheme(DenseMode mode) {
    return mode == DenseMode::Int8 ? Scheme{model::DType::I8, 0} : Scheme{model::DType::Q4, kDenseInt4Group};
}

Scheme expert_scheme(experts::Format format) {
    return format == experts::Format::Int8 ? Scheme{model::DType::I8, 0} : Scheme{model::DType::Q4, kExpertGroup};
}

void quantize_rows(const Scheme& scheme, const float* w, std::int64_t rows, std::int64_t cols, std::byte* data,
                   float* scales, QuantError& errors, const std::string& kind) {
    if (scheme.dtype == model::DType::I8) quant::quantize_int8_rows_into(w, rows, cols, data, scales);
    else quant::quantize_int4_groups_into(w, rows, cols, scheme.group, data, scales);
    std::vector<float> back(static_cast<std::size_t>(cols));
    const std::string name = scheme.name();
    const std::int64_t row_bytes = scheme.row_bytes(cols), groups = scheme.groups(cols);
    for (std::int64_t r = 0; r < rows; ++r) {
        dequantize_row(scheme, data + r * row_bytes, scales + r * groups, cols, back.data());
        errors.add_rows(kind, name, w + r * cols, back.data(), cols);
    }
}

}  // namespace inkling::convert
