// ARM64 bf16 products (bf16_matmul.h beside this file): engine/cpu/bf16_matmul.h's pattern
// with vfmaq_f32 (fused, one rounding, as std::fma) — lane j of the four accumulators is
// acc[j], the odd column of a pair first, then the even one — and the final tree in plain C++.
#include "engine/cpu/arm64/bf16_matmul.h"

#include <arm_neon.h>

#include <algorithm>
#include <cstring>

namespace inkling::cpu::arm64 {
namespace {

constexpr std::int64_t kChunk = 32;

// bf16 → f32 is the 16 bits moved to the top.
inline float32x4_t widen_lo(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16)); }
inline float32x4_t widen_hi(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_high_n_u16(v, 16)); }

// One chunk of 32 weights (column order) against its packed activations: 16 odd ones, then
// 16 even ones. vld2q splits 8 column pairs into the even (val[0]) and odd (val[1]) columns.
inline void chunk(const std::uint16_t* w, const float* a, float32x4_t* acc) {
    const uint16x8x2_t p0 = vld2q_u16(w), p1 = vld2q_u16(w + 16);
    const float32x4_t odd[4] = {widen_lo(p0.val[1]), widen_hi(p0.val[1]), widen_lo(p1.val[1]), widen_hi(p1.val[1])};
    const float32x4_t even[4] = {widen_lo(p0.val[0]), widen_hi(p0.val[0]), widen_lo(p1.val[0]), widen_hi(p1.val[0])};
    for (int q = 0; q < 4; ++q) {
        acc[q] = vfmaq_f32(acc[q], odd[q], vld1q_f32(a + 4 * q));
        acc[q] = vfmaq_f32(acc[q], even[q], vld1q_f32(a + 16 + 4 * q));
    }
}

float dot(const std::uint16_t* w, std::int64_t cols, const float* a, std::int64_t chunks) {
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    const std::int64_t whole = cols / kChunk;
    for (std::int64_t c = 0; c < whole; ++c) chunk(w + c * kChunk, a + c * kChunk, acc);
    if (whole < chunks) {
        // The last, partial chunk: weights past the row's end are +0, as the generic kernel reads them.
        std::uint16_t tail[kChunk] = {};
        std::memcpy(tail, w + whole * kChunk, static_cast<std::size_t>(cols - whole * kChunk) * sizeof(std::uint16_t));
        chunk(tail, a + whole * kChunk, acc);
    }
    float s[16];
    for (int q = 0; q < 4; ++q) vst1q_f32(s + 4 * q, acc[q]);
    for (int h = 8; h > 0; h /= 2)
        for (int i = 0; i < h; ++i) s[i] = s[i] + s[i + h];
    return s[0];
}

}  // namespace

void bf16_rows_neon(const model::Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end,
                    float* y) {
    for (std::int64_t o = begin; o < end; ++o) {
        const auto* row = reinterpret_cast<const std::uint16_t*>(w.row(o));
        for (std::int64_t s = 0; s < x.rows; ++s)
            y[s * w.rows + o] = dot(row, w.cols, x.f32.data() + s * x.stride, x.chunks);
    }
}

}  // namespace inkling::cpu::arm64
