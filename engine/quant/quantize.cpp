#include "engine/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace inkling::quant {
namespace {

// round(v / s), ties away from zero, clamped to ±limit; s = 0 (an all-zero row, group or
// block) gives 0. Every quantizer here divides (v / s), never multiplies by 1/s: the two
// differ in the last bit, and the docs promise q = round(w / s).
int round_div(float v, float s, int limit) {
    if (s == 0.0f) return 0;
    const long q = std::lround(v / s);
    return static_cast<int>(std::clamp<long>(q, -limit, limit));
}

float max_abs(const float* v, std::int64_t n) {
    float m = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(v[i]));
    return m;
}

void check_group(std::int64_t group) {
    if (group <= 0 || group % kBlock != 0)
        throw std::invalid_argument("int4 group size must be a positive multiple of 32, not " + std::to_string(group));
}

std::int64_t groups_of(std::int64_t padded, std::int64_t group) { return (padded + group - 1) / group; }

}  // namespace

model::Matrix QuantizedMatrix::view() const {
    model::Matrix m;
    m.data = data.data();
    m.dtype = dtype;
    m.rows = rows;
    m.cols = cols;
    m.row_stride = padded;
    m.scales = scales.data();
    m.group = group;
    m.scale_stride = groups;
    return m;
}

void quantize_int8_rows_into(const float* w, std::int64_t rows, std::int64_t cols, std::byte* data, float* scales) {
    const std::int64_t padded = padded_cols(cols);
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* src = w + r * cols;
        auto* dst = reinterpret_cast<std::int8_t*>(data + r * padded);
        const float s = max_abs(src, cols) / 127.0f;
        scales[r] = s;
        for (std::int64_t c = 0; c < cols; ++c) dst[c] = static_cast<std::int8_t>(round_div(src[c], s, 127));
        std::fill(dst + cols, dst + padded, std::int8_t{0});
    }
}

void quantize_int4_groups_into(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t group,
                               std::byte* data, float* scales) {
    check_group(group);
    const std::int64_t padded = padded_cols(cols), groups = groups_of(padded, group);
    std::vector<int> q(static_cast<std::size_t>(padded));
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* src = w + r * cols;
        std::fill(q.begin(), q.end(), 0);
        for (std::int64_t g = 0; g < groups; ++g) {
            const std::int64_t begin = g * group, end = std::min(cols, begin + group);
            const float s = begin < cols ? max_abs(src + begin, end - begin) / 7.0f : 0.0f;
            scales[r * groups + g] = s;
            for (std::int64_t c = begin; c < end; ++c) q[static_cast<std::size_t>(c)] = round_div(src[c], s, 7);
        }
        std::byte* dst = data + r * padded / 2;
        for (std::int64_t j = 0; j < padded / 2; ++j) {
            const unsigned lo = static_cast<unsigned>(q[static_cast<std::size_t>(2 * j)]) & 0xf;
            const unsigned hi = static_cast<unsigned>(q[static_cast<std::size_t>(2 * j + 1)]) & 0xf;
            dst[j] = static_cast<std::byte>(lo | (hi << 4));
        }
    }
}

QuantizedMatrix quantize_int8_rows(const float* w, std::int64_t rows, std::int64_t cols) {
    QuantizedMatrix m;
    m.dtype = model::DType::I8;
    m.rows = rows;
    m.cols = cols;
    m.padded = padded_cols(cols);
    m.group = m.padded;
    m.groups = 1;
    m.data.resize(static_cast<std::size_t>(rows * m.padded));
    m.scales.resize(static_cast<std::size_t>(rows));
    quantize_int8_rows_into(w, rows, cols, m.data.data(), m.scales.data());
    return m;
}

QuantizedMatrix quantize_int4_groups(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t group) {
    check_group(group);
    QuantizedMatrix m;
    m.dtype = model::DType::Q4;
    m.rows = rows;
    m.cols = cols;
    m.padded = padded_cols(cols);
    m.group = group;
    m.groups = groups_of(m.padded, group);
    m.data.resize(static_cast<std::size_t>(rows * m.padded / 2));
    m.scales.resize(static_cast<std::size_t>(rows * m.groups));
    quantize_int4_groups_into(w, rows, cols, group, m.data.data(), m.scales.data());
    return m;
}

void quantize_activations(const float* x, std::int64_t rows, std::int64_t cols, QuantizedActivations& out) {
    out.rows = rows;
    out.cols = cols;
    out.padded = padded_cols(cols);
    out.blocks = out.padded / kBlock;
    out.q.assign(static_cast<std::size_t>(rows * out.padded), 0);
    out.scales.resize(static_cast<std::size_t>(rows * out.blocks));
    out.sums.resize(static_cast<std::size_t>(rows * out.blocks));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t b = 0; b < out.blocks; ++b) {
            const std::int64_t begin = b * kBlock, n = std::min(cols, begin + kBlock) - begin;
            const float* src = x + r * cols + begin;
            std::int8_t* q = out.q.data() + r * out.padded + begin;
            const float s = max_abs(src, n) / 127.0f;
            std::int32_t sum = 0;
            for (std::int64_t i = 0; i < n; ++i) {
                q[i] = static_cast<std::int8_t>(round_div(src[i], s, 127));
                sum += q[i];
            }
            out.scales[static_cast<std::size_t>(r * out.blocks + b)] = s;
            out.sums[static_cast<std::size_t>(r * out.blocks + b)] = sum;
        }
}

double relative_l2(const float* a, const float* b, std::int64_t n) {
    double diff = 0.0, norm = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        diff += d * d;
        norm += static_cast<double>(a[i]) * a[i];
    }
    if (norm == 0.0) return diff == 0.0 ? 0.0 : INFINITY;
    return std::sqrt(diff / norm);
}

}  // namespace inkling::quant
