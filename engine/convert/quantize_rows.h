// One quantization scheme of the converter (int8 per row, int4 in groups of 32 or 64) and
// the step every writer shares: f32 rows in, quantized rows and scales out (laid out as a
// model::Matrix reads them), the error measured on the way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/convert/options.h"
#include "engine/convert/quant_error.h"
#include "engine/model/tensor.h"

namespace inkling::convert {

struct Scheme {
    model::DType dtype = model::DType::Q4;  // I8 (one scale a row) or Q4 (groups of `group`)
    std::int64_t group = 32;                // Q4 only

    std::string name() const;  // "int8", "int4g32", "int4g64"
    std::int64_t padded(std::int64_t cols) const;
    std::int64_t groups(std::int64_t cols) const;     // scales a row
    std::int64_t row_bytes(std::int64_t cols) const;  // quantized bytes a row (padded)
};

// What --dense (Keep: unused) and --experts ask for.
Scheme dense_scheme(DenseMode mode);
Scheme expert_scheme(experts::Format format);

// Quantizes `rows` rows of `cols` f32 values at `w` into `data` (row stride padded) and
// `scales` ([rows][groups]); adds ‖w − dequantized‖² to `errors` under `kind`.
void quantize_rows(const Scheme& scheme, const float* w, std::int64_t rows, std::int64_t cols, std::byte* data,
                   float* scales, QuantError& errors, const std::string& kind);

}  // namespace inkling::convert
