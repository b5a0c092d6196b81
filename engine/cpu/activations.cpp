#include "engine/cpu/activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/exp_core.h"
#include "engine/cpu/kernels.h"

namespace inkling::cpu {
namespace {

// The one formula the scalar functions and every loop inline, so they agree bit for bit:
// without contraction each step is one correctly rounded IEEE operation, whatever the
// vector width the compiler picks. The device's shaders take the same steps
// (shaders/pointwise.glsl: no division, whose rounding a GPU chooses), so a SwiGLU row is
// the same bits on both — what a converted model's int8 quantization of it needs.
inline float sigmoid_of(float v) {
    const float e = exp_nonpositive_core(-std::fabs(v));  // 0 for NaN: passed through below
    const float y = reciprocal_1_to_2(1.0f + e);
    const float s = v >= 0.0f ? y : e * y;
    return v == v ? s : v;
}

// Results a block of swiglu computes before it writes them (what in-place use needs).
constexpr std::int64_t kBlock = 64;

__attribute__((always_inline)) inline void swiglu_blocks(const float* gate, const float* up, std::int64_t stride,
                                                          std::int64_t n, float* out) {
    alignas(64) float block[kBlock];
    for (std::int64_t b = 0; b < n; b += kBlock) {
        const std::int64_t m = std::min(kBlock, n - b);
        const float* g = gate + b * stride;
        const float* u = up + b * stride;
        if (stride == 1)
            for (std::int64_t i = 0; i < m; ++i) block[i] = g[i] * sigmoid_of(g[i]) * u[i];
        else
            for (std::int64_t i = 0; i < m; ++i) block[i] = g[i * stride] * sigmoid_of(g[i * stride]) * u[i * stride];
        std::memcpy(out + b, block, static_cast<std::size_t>(m) * sizeof(float));
    }
}

__attribute__((always_inline)) inline void numerators(float* v, std::int64_t n, float mx) {
    for (std::int64_t i = 0; i < n; ++i) {
        const float d = v[i] - mx;
        v[i] = d == d ? exp_nonpositive_core(d) : d;
    }
}

#if defined(__x86_64__)
// The same loop compiled for wider vectors (the build's baseline is SSE2); the same bits, as
// each step is one IEEE operation (a decode step's MoE layer of the mid model, 2,560
// interleaved values, takes a few µs in SSE2 and under half that in AVX-512).
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) void swiglu_avx512(const float* gate, const float* up,
                                                                                std::int64_t stride, std::int64_t n,
                                                                                float* out) {
    swiglu_blocks(gate, up, stride, n, out);
}
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) void numerators_avx512(float* v, std::int64_t n,
                                                                                    float mx) {
    numerators(v, n, mx);
}
__attribute__((target("avx2"))) void numerators_avx2(float* v, std::int64_t n, float mx) { numerators(v, n, mx); }
__attribute__((target("avx2"))) void swiglu_avx2(const float* gate, const float* up, std::int64_t stride,
                                                 std::int64_t n, float* out) {
    swiglu_blocks(gate, up, stride, n, out);
}
#endif

}  // namespace

float sigmoid(float v) { return sigmoid_of(v); }

float silu(float v) { return v * sigmoid_of(v); }

float reciprocal(float x) { return reciprocal_positive(x); }

void swiglu(const float* gate, const float* up, std::int64_t stride, std::int64_t n, float* out) {
#if defined(__x86_64__)
    switch (active_isa()) {
        case Isa::Avx512: return swiglu_avx512(gate, up, stride, n, out);
        case Isa::Avx2: return swiglu_avx2(gate, up, stride, n, out);
        default: break;
    }
#endif
    swiglu_blocks(gate, up, stride, n, out);
}

void softmax_numerators(float* v, std::int64_t n, float mx) {
#if defined(__x86_64__)
    switch (active_isa()) {
        case Isa::Avx512: return numerators_avx512(v, n, mx);
        case Isa::Avx2: return numerators_avx2(v, n, mx);
        default: break;
    }
#endif
    numerators(v, n, mx);
}

}  // namespace inkling::cpu
