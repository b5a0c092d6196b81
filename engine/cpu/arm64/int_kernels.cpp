// ARM64 integer kernels (int_kernels.h beside this file). The integer part of a block is
// exact however it is formed; the float part is int_kernels.h's pattern, 16 accumulators
// acc[b % 16] in four q registers, 16 blocks a step, the blocks past the last whole step and
// the final tree in plain C++ — the generic code's operations in the generic code's order.
#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/arm64/int_kernels.h"

#include <arm_neon.h>

#include <cmath>
#include <vector>

#include "engine/cpu/arm64/target.h"
#include "engine/quant/quantize.h"

namespace inkling::cpu::arm64 {
namespace {

constexpr std::int64_t kB = quant::kBlock;  // 32
static_assert(kB == 32, "the kernels below read a block as two 16-byte halves");

// y from the exact block sums `isum` (one per block of k).
float fold(const std::int32_t* isum, const IntBlocks& k) {
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    std::int64_t b = 0;
    for (; b + 16 <= k.n; b += 16)
        for (int q = 0; q < 4; ++q) {
            const std::int64_t at = b + 4 * q;
            const float32x4_t d = vmulq_f32(vld1q_f32(k.sw + at), vld1q_f32(k.sx + at));
            acc[q] = vfmaq_f32(acc[q], d, vcvtq_f32_s32(vld1q_s32(isum + at)));  // acc + d·isum, one rounding
        }
    float a[16];
    for (int q = 0; q < 4; ++q) vst1q_f32(a + 4 * q, acc[q]);
    for (; b < k.n; ++b) a[b % 16] = std::fma(k.sw[b] * k.sx[b], static_cast<float>(isum[b]), a[b % 16]);
    for (int h = 8; h > 0; h /= 2)
        for (int i = 0; i < h; ++i) a[i] = a[i] + a[i + h];
    return a[0];
}

// Scratch for the block sums of up to four outputs.
std::int32_t* sums_buffer(std::int64_t blocks) {
    std::vector<std::int32_t>& buf = thread_scratch<std::int32_t, struct buf_scratch>();
    if (buf.size() < static_cast<std::size_t>(4 * blocks)) buf.resize(static_cast<std::size_t>(4 * blocks));
    return buf.data();
}

// A packed int4 block's 16 bytes → its low nibbles (elements 0, 2, …, 30) and high nibbles
// (1, 3, …, 31) as signed int8: the q4 order of the activations.
inline void expand_q4(const std::uint8_t* w, int8x16_t& lo, int8x16_t& hi) {
    const int8x16_t b = vreinterpretq_s8_u8(vld1q_u8(w));
    lo = vshrq_n_s8(vshlq_n_s8(b, 4), 4);  // arithmetic: sign-extends the nibble
    hi = vshrq_n_s8(b, 4);
}

// Σ a·b over 16 int8 pairs, NEON: products are exact in int16 (|−128·−128| = 2^14), then
// pairwise into int32.
inline int32x4_t mla16_neon(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

}  // namespace

float dot_i8_neon(const std::int8_t* w, const std::int8_t* x, const IntBlocks& k) {
    std::int32_t* isum = sums_buffer(k.n);
    for (std::int64_t b = 0; b < k.n; ++b) {
        const std::int8_t* wb = w + b * kB;
        const std::int8_t* xb = x + b * kB;
        int32x4_t acc = mla16_neon(vdupq_n_s32(0), vld1q_s8(wb), vld1q_s8(xb));
        acc = mla16_neon(acc, vld1q_s8(wb + 16), vld1q_s8(xb + 16));
        isum[b] = vaddvq_s32(acc);
    }
    return fold(isum, k);
}

float dot_q4_neon(const std::uint8_t* w, const std::int8_t* x, const IntBlocks& k) {
    std::int32_t* isum = sums_buffer(k.n);
    for (std::int64_t b = 0; b < k.n; ++b) {
        int8x16_t lo, hi;
        expand_q4(w + b * kB / 2, lo, hi);
        const std::int8_t* xb = x + b * kB;
        isum[b] = vaddvq_s32(mla16_neon(mla16_neon(vdupq_n_s32(0), lo, vld1q_s8(xb)), hi, vld1q_s8(xb + 16)));
    }
    return fold(isum, k);
}

#if defined(INKLING_HAVE_DOTPROD)
INKLING_DOTPROD float dot_i8_dotprod(const std::int8_t* w, const std::int8_t* x, const IntBlocks& k) {
    std::int32_t* isum = sums_buffer(k.n);
    for (std::int64_t b = 0; b < k.n; ++b) {
        const std::int8_t* wb = w + b * kB;
        const std::int8_t* xb = x + b * kB;
        int32x4_t acc = vdotq_s32(vdupq_n_s32(0), vld1q_s8(wb), vld1q_s8(xb));
        isum[b] = vaddvq_s32(vdotq_s32(acc, vld1q_s8(wb + 16), vld1q_s8(xb + 16)));
    }
    return fold(isum, k);
}

INKLING_DOTPROD float dot_q4_dotprod(const std::uint8_t* w, const std::int8_t* x, const IntBlocks& k) {
    std::int32_t* isum = sums_buffer(k.n);
    for (std::int64_t b = 0; b < k.n; ++b) {
        int8x16_t lo, hi;
        expand_q4(w + b * kB / 2, lo, hi);
        const std::int8_t* xb = x + b * kB;
        isum[b] = vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(xb)), hi, vld1q_s8(xb + 16)));
    }
    return fold(isum, k);
}
#else
float dot_i8_dotprod(const std::int8_t* w, const std::int8_t* x, const IntBlocks& k) { return dot_i8_neon(w, x, k); }
float dot_q4_dotprod(const std::uint8_t* w, const std::int8_t* x, const IntBlocks& k) { return dot_q4_neon(w, x, k); }
#endif

#if defined(INKLING_HAVE_I8MM)
namespace {

// One 16-byte segment of two weight rows against the same segment of two activation rows:
// SMMLA multiplies a 2×8 matrix (its first operand's two 8-byte halves are the rows) by the
// transpose of another, giving [w0·x0, w0·x1, w1·x0, w1·x1] over those 8 columns; two such
// cover the 16.
INKLING_I8MM inline int32x4_t mmla16(int32x4_t acc, int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
    const auto lo = [](int8x16_t a, int8x16_t b) {
        return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
    };
    const auto hi = [](int8x16_t a, int8x16_t b) {
        return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
    };
    acc = vmmlaq_s32(acc, lo(w0, w1), lo(x0, x1));
    return vmmlaq_s32(acc, hi(w0, w1), hi(x0, x1));
}

}  // namespace

INKLING_I8MM void tile_i8_i8mm(const std::uint8_t* const* w, const std::int8_t* const* x, const IntBlocks* k,
                               float* out) {
    const std::int64_t n = k[0].n;
    std::int32_t* isum = sums_buffer(n);
    const auto* w0 = reinterpret_cast<const std::int8_t*>(w[0]);
    const auto* w1 = reinterpret_cast<const std::int8_t*>(w[1]);
    for (std::int64_t b = 0; b < n; ++b) {
        const std::int64_t at = b * kB;
        int32x4_t acc = mmla16(vdupq_n_s32(0), vld1q_s8(w0 + at), vld1q_s8(w1 + at), vld1q_s8(x[0] + at),
                               vld1q_s8(x[1] + at));
        acc = mmla16(acc, vld1q_s8(w0 + at + 16), vld1q_s8(w1 + at + 16), vld1q_s8(x[0] + at + 16),
                     vld1q_s8(x[1] + at + 16));
        isum[b] = vgetq_lane_s32(acc, 0);
        isum[n + b] = vgetq_lane_s32(acc, 1);
        isum[2 * n + b] = vgetq_lane_s32(acc, 2);
        isum[3 * n + b] = vgetq_lane_s32(acc, 3);
    }
    for (int e = 0; e < 4; ++e) out[e] = fold(isum + e * n, k[e]);
}

INKLING_I8MM void tile_q4_i8mm(const std::uint8_t* const* w, const std::int8_t* const* x, const IntBlocks* k,
                               float* out) {
    const std::int64_t n = k[0].n;
    std::int32_t* isum = sums_buffer(n);
    for (std::int64_t b = 0; b < n; ++b) {
        const std::int64_t at = b * kB;
        int8x16_t lo0, hi0, lo1, hi1;
        expand_q4(w[0] + at / 2, lo0, hi0);
        expand_q4(w[1] + at / 2, lo1, hi1);
        int32x4_t acc = mmla16(vdupq_n_s32(0), lo0, lo1, vld1q_s8(x[0] + at), vld1q_s8(x[1] + at));
        acc = mmla16(acc, hi0, hi1, vld1q_s8(x[0] + at + 16), vld1q_s8(x[1] + at + 16));
        isum[b] = vgetq_lane_s32(acc, 0);
        isum[n + b] = vgetq_lane_s32(acc, 1);
        isum[2 * n + b] = vgetq_lane_s32(acc, 2);
        isum[3 * n + b] = vgetq_lane_s32(acc, 3);
    }
    for (int e = 0; e < 4; ++e) out[e] = fold(isum + e * n, k[e]);
}
#else
void tile_i8_i8mm(const std::uint8_t* const* w, const std::int8_t* const* x, const IntBlocks* k, float* out) {
    for (int e = 0; e < 4; ++e) out[e] = dot_i8_dotprod(reinterpret_cast<const std::int8_t*>(w[e / 2]), x[e % 2], k[e]);
}
void tile_q4_i8mm(const std::uint8_t* const* w, const std::int8_t* const* x, const IntBlocks* k, float* out) {
    for (int e = 0; e < 4; ++e) out[e] = dot_q4_dotprod(w[e / 2], x[e % 2], k[e]);
}
#endif

}  // namespace inkling::cpu::arm64
