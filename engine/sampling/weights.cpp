#include "engine/sampling/weights.h"

#include <bit>
#include <cstdint>

namespace inkling::sampling {
namespace {

// Cephes' expf: e^x = 2^n · e^r with n = round(x / ln 2), r = x − n ln 2 in [−ln2/2, ln2/2]
// (ln 2 in two parts: n · kLn2Hi is exact for |n| < 2^8), e^r by a degree-6 polynomial.
// Branch-free and without a float-to-int conversion, so it vectorizes: adding 1.5 · 2^23
// rounds x / ln 2 to the integer n and leaves n in the sum's low bits, which then become
// 2^n's exponent field; lanes out of range compute garbage and are replaced by 0.
inline float exp_core(float x) {
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

}  // namespace

float exp_nonpositive(float x) { return exp_core(x); }

void softmax_weights(std::span<const float> logits, float mx, float inv_t, std::span<float> out) {
    const float* l = logits.data();
    float* o = out.data();
    const std::size_t n = logits.size();
    for (std::size_t i = 0; i < n; ++i) o[i] = exp_core((l[i] - mx) * inv_t);
}

double sum_weights(std::span<const float> w) {
    constexpr std::size_t kLanes = 8;
    double lane[kLanes] = {};
    const std::size_t n = w.size();
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::size_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(w[i + l]);
    for (std::size_t l = 0; i < n; ++i, ++l) lane[l] += static_cast<double>(w[i]);
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

void drop_below(std::span<float> w, float floor, bool ties) {
    float* v = w.data();
    const std::size_t n = w.size();
    if (ties)
        for (std::size_t i = 0; i < n; ++i) v[i] = v[i] <= floor ? 0.0f : v[i];
    else
        for (std::size_t i = 0; i < n; ++i) v[i] = v[i] < floor ? 0.0f : v[i];
}

}  // namespace inkling::sampling
