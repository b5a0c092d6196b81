#include "engine/convert/quantize_rows.h"

#include <vector>

#include "engine/quant/quantize.h"

namespace inkling::convert {

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
    model::Matrix q;
    q.data = data;
    q.dtype = scheme.dtype;
    q.rows = rows;
    q.cols = cols;
    q.row_stride = scheme.padded(cols);
    q.scales = scales;
    q.group = scheme.dtype == model::DType::I8 ? q.row_stride : scheme.group;
    q.scale_stride = scheme.groups(cols);
    std::vector<float> back(static_cast<std::size_t>(cols));
    const std::string name = scheme.name();
    for (std::int64_t r = 0; r < rows; ++r) {
        model::row_to_f32(q, r, back.data());
        errors.add_rows(kind, name, w + r * cols, back.data(), cols);
    }
}

}  // namespace inkling::convert
