// e^x for x ≤ 0 in f32 through Cephes' polynomial: the one exp the engine's own numerics use
// (the sampler's softmax weights, SiLU and sigmoid; shaders/pointwise.glsl is its copy on the
// device), so their results do not depend on the
// C library's expf — glibc picks an FMA or a plain version by CPU, other platforms have
// their own — and plain loops over it vectorize.
//
// Include it only from files compiled with -ffp-contract=off (and -fno-trapping-math, so
// the loops vectorize), as engine/CMakeLists.txt lists them: with contraction the compiler
// may fuse the polynomial's steps where the target has FMA (ARM64 always does), and the bits
// would differ from one ISA to another.
#pragma once

#include <bit>
#include <cstdint>

namespace inkling::cpu {

// e^x = 2^n · e^r with n = round(x / ln 2), r = x − n ln 2 in [−ln2/2, ln2/2] (ln 2 in two
// parts: n · kLn2Hi is exact for |n| < 2^8), e^r by a degree-6 polynomial; within 2 ulp.
// Branch-free and without a float-to-int conversion: adding 1.5 · 2^23 rounds x / ln 2 to
// the integer n and leaves n in the sum's low bits, which then become 2^n's exponent field;
// lanes out of range compute garbage and are replaced by 0. Exactly 0 below −87 (where the
// result would leave the normal floats), for −inf and for NaN; x > 0 is not expected.
inline float exp_nonpositive_core(float x) {
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
    constexpr float kRound = 12582912.0f;  // 1.5 · 2^23
    constexpr std::uint32_t kRoundBits = 0x4b400000u;
    const float shifted = x * kLog2e + kRound;
    const float n = shifted - kRound;
    float r = x - n * kLn2Hi;
    r = r - n * kLn2Lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    // n ≥ −126 where the result is kept (x ≥ −87), so 2^n is a normal float.
    const float scale = std::bit_cast<float>((std::bit_cast<std::uint32_t>(shifted) - kRoundBits + 127u) << 23);
    const float e = p * scale;
    return x >= -87.0f ? e : 0.0f;  // false for NaN too
}

// 1 / d for d in [1, 2] (the sigmoid's 1 / (1 + e^−|v|)) without a division: the line
// 24/17 − 8/17 · d (within 1/17 of it), then three Newton steps y += y · (1 − d·y); within
// 1.15 ulp of the quotient over every float of [1, 2] (checked exhaustively). Additions and
// multiplications only, so a Vulkan shader takes the same steps to the same bits
// (shaders/pointwise.glsl), where a GPU's `/` is allowed 2.5 ulp of its own choosing.
inline float reciprocal_1_to_2(float d) {
    float y = 1.41176470588235294f - 0.470588235294117647f * d;
    for (int k = 0; k < 3; ++k) {
        const float t = 1.0f - d * y;
        y = y + y * t;
    }
    return y;
}

// 1 / x for a positive normal x whose reciprocal is normal too (x in [2^−126, 2^126]): x's
// significand m in [1, 2) through reciprocal_1_to_2, then 2^−exponent, an exact scaling.
// The MoE router's 1 / Σ sigmoids, on the CPU and in moe_route.comp alike.
inline float reciprocal_positive(float x) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
    const std::uint32_t exponent = bits >> 23;  // x > 0: no sign bit
    const float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f800000u);
    const float scale = std::bit_cast<float>((254u - exponent) << 23);  // 2^(127 − exponent)
    return reciprocal_1_to_2(m) * scale;
}

}  // namespace inkling::cpu
