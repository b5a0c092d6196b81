// y[s][o] = Σ_i x[s][i] · W[o][i] for many activation rows at once (a prompt chunk): gemv.comp's
// product and push constants, tiled so each weight is read once per 32 rows instead of once
// per row (gemv.comp walks the weights again for every row). A workgroup computes a tile of
// 32 rows × 64 outputs, stepping over the columns 32 at a time through shared memory: the
// tile's activations and weights (bf16 widened to f32) loaded once by all 256 lanes, then
// each lane's 2 × 4 outputs accumulated column by column in increasing i. The plain tiled
// path, for every device (lavapipe included); Ops::gemv takes it from gemm_rows rows up.
// swiglu 1: x is the gate and each activation silu(x)·u, as gemv.comp's.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "pointwise.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint FORMAT = 0;  // 0 f32 weights, 1 bf16 (two a uint, even element low)

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 3) readonly buffer U { float u[]; };
layout(push_constant) uniform Push {
    uint O, I, S;
    uint stride, w_off;
    uint x_off, x_stride;
    uint y_off, y_stride;
    uint swiglu;
} p;

const uint TS = 32u, TO = 64u, TK = 32u;
shared float xs[TS][TK + 1u];  // +1: lanes reading a column hit different banks
shared float ws[TO][TK + 1u];

float weight(uint e) {
    if (FORMAT == 0) return uintBitsToFloat(w[e]);
    const uint word = w[e >> 1];
    return uintBitsToFloat((e & 1u) == 0u ? word << 16 : word & 0xffff0000u);
}

float act(uint i) {
    const float g = x[i];
    return p.swiglu != 0u ? swiglu_of(g, u[i]) : g;
}

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint o0 = gl_WorkGroupID.x * TO, s0 = gl_WorkGroupID.y * TS;
    const uint ty = lid / 16u, tx = lid % 16u;  // the lane's rows s0 + 2·ty + r, outputs o0 + 4·tx + j
    float acc[2][4] = float[2][4](float[4](0.0, 0.0, 0.0, 0.0), float[4](0.0, 0.0, 0.0, 0.0));
    for (uint k0 = 0; k0 < p.I; k0 += TK) {
        for (uint e = lid; e < TS * TK; e += 256u) {
            const uint r = e / TK, k = e % TK, s = s0 + r, i = k0 + k;
            xs[r][k] = (s < p.S && i < p.I) ? act(p.x_off + s * p.x_stride + i) : 0.0;
        }
        for (uint e = lid; e < TO * TK; e += 256u) {
            const uint r = e / TK, k = e % TK, o = o0 + r, i = k0 + k;
            ws[r][k] = (o < p.O && i < p.I) ? weight(p.w_off + o * p.stride + i) : 0.0;
        }
        barrier();
        const uint kn = min(TK, p.I - k0);  // the padded columns are not added (+0 would be the same)
        for (uint k = 0; k < kn; ++k) {
            const float a0 = xs[2u * ty][k], a1 = xs[2u * ty + 1u][k];
            for (uint j = 0; j < 4u; ++j) {
                const float b = ws[4u * tx + j][k];
                acc[0][j] += a0 * b;
                acc[1][j] += a1 * b;
            }
        }
        barrier();
    }
    for (uint r = 0; r < 2u; ++r) {
        const uint s = s0 + 2u * ty + r;
        if (s >= p.S) continue;
        for (uint j = 0; j < 4u; ++j) {
            const uint o = o0 + 4u * tx + j;
            if (o < p.O) y[p.y_off + s * p.y_stride + o] = acc[r][j];
        }
    }
}
