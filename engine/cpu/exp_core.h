// e^x for x ≤ 0 in f32 through Cephes' polynomial: the one exp the engine's own numerics use
// (the sampler's softmax weights, SiLU and sigmoid), so their results do not depend on the
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

}  // namespace inkling::cpu
