// The forward's pointwise nonlinearities on the CPU: sigmoid (the router's expert scores),
// SiLU and SwiGLU (every FFN and expert), attention's softmax numerators. Through exp_core.h's exp, in a file compiled
// without contraction, so that every ISA and platform computes the same bits, and in loops
// the compiler vectorizes: a MoE layer's SwiGLU runs on the engine's one thread while the
// workers wait (Inkling-Small: eight experts of 2,048, 16,384 values a token and layer; the
// mid model's 2,560 took 8-9 µs through glibc's expf, 2.4 here).
#pragma once

#include <cstdint>

namespace inkling::cpu {

// 1 / (1 + e^−v), taken as e / (1 + e) with e = e^v for v < 0 (no overflow): within a few
// ulp of the exact value; NaN for NaN, 0 and 1 at −inf and +inf, and 0 below −87 (where the
// exact value is under 2^−125: SiLU's absolute error there is below 1e-35).
float sigmoid(float v);
// v · sigmoid(v).
float silu(float v);
// 1 / x for a positive normal x (exp_core.h's reciprocal_positive: additions and
// multiplications only, as the device's shaders compute it; within 1.15 ulp).
float reciprocal(float x);

// out[i] = silu(gate[i·stride]) · up[i·stride] for i < n, each bit for bit as the scalar
// functions give it. `out` may be `gate` itself (in place: an FFN's buffer of interleaved
// [g0 u0 g1 u1 …] with stride 2, or of [gates | ups] with stride 1): each block of results
// is written only after the inputs it overwrites have been read.
void swiglu(const float* gate, const float* up, std::int64_t stride, std::int64_t n, float* out);

// v[i] = e^(v[i] − mx) for i < n, in place: a softmax's numerators (attention's weights),
// mx ≥ every v[i]. 0 where v[i] − mx < −87 or is −inf; NaN stays NaN.
void softmax_numerators(float* v, std::int64_t n, float mx);

}  // namespace inkling::cpu
