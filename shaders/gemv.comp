// y[s][o] = Σ_i x[s][i] · W[o][i] for s < S, o < O: the dense projections. One subgroup
// per output row, its lanes striding over the columns in 16-byte loads where the row is
// aligned to them, the partial sums joined with subgroupAdd.
// FORMAT (specialization constant 0): 0 f32 weights, 1 bf16 weights (two a uint, element
// 2j in the low half). Weights start `w_off` elements into their buffer, rows `stride`
// elements apart (a release checkpoint's gate/up rows are interleaved: stride 2·I).
// swiglu 1: x is the gate, and each activation is silu(x)·u (u at x's offsets), computed as
// ew.comp's SWIGLU computes it — the down projection reads the MLP's product without a
// SwiGLU dispatch and a barrier before it.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require
#include "pointwise.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint FORMAT = 0;

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };  // the same, 16 B a load
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer X4 { vec4 x4[]; };  // the same, 16 B a load
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 3) readonly buffer U { float u[]; };   // swiglu: the up rows
layout(std430, set = 0, binding = 3) readonly buffer U4 { vec4 u4[]; };
layout(push_constant) uniform Push {
    uint O, I, S;     // output rows, columns, activation rows
    uint stride;      // weight row stride, elements
    uint w_off;       // first weight element
    uint x_off, x_stride;  // first float of x, floats between activation rows
    uint y_off, y_stride;  // first float of y, floats between output rows of y
    uint swiglu;
} p;

vec4 act4(uint xi) {
    const vec4 g = x4[xi];
    return p.swiglu != 0u ? swiglu_of4(g, u4[xi]) : g;
}
float act(uint i) {
    const float g = x[i];
    return p.swiglu != 0u ? swiglu_of(g, u[i]) : g;
}

// One 16-byte load of weights against its activations.
float term(uvec4 q, uint xi) {
    if (FORMAT == 0) return dot(uintBitsToFloat(q), act4(xi));
    // bf16 pairs: the low half is the even element.
    const vec4 lo = uintBitsToFloat(q << 16), hi = uintBitsToFloat(q & 0xffff0000u);
    return dot(vec4(lo.x, hi.x, lo.y, hi.y), act4(xi)) + dot(vec4(lo.z, hi.z, lo.w, hi.w), act4(xi + 1));
}

float weight(uint e) {
    if (FORMAT == 0) return uintBitsToFloat(w[e]);
    const uint word = w[e >> 1];
    return uintBitsToFloat((e & 1u) == 0u ? word << 16 : word & 0xffff0000u);
}

void main() {
    // One subgroup a row (no barriers: its lanes' sums meet in subgroupAdd), the
    // workgroup's subgroups on consecutive rows, grid-stride over the rest.
    const uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
    const uint per = FORMAT == 0 ? 4u : 8u;  // elements a 16-byte load holds
    const bool wide = p.I % per == 0 && p.stride % per == 0 && p.w_off % per == 0 && p.x_off % 4 == 0 &&
                      p.x_stride % 4 == 0;
    for (uint o = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; o < p.O;
         o += gl_NumWorkGroups.x * gl_NumSubgroups) {
        const uint row = p.w_off + o * p.stride;
        for (uint s = 0; s < p.S; ++s) {
            float acc = 0.0;
            const uint xb = p.x_off + s * p.x_stride;
            if (wide) {
                // Four loads in flight a lane before their sums (a decode row of a small
                // matrix is a few loads a lane: latency, not bandwidth), added in the
                // order of the one-load loop below, so the bits are the same.
                const uint base = row / per, n = p.I / per;
                uint c = lane;
                for (; c + 3u * width < n; c += 4u * width) {
                    const uvec4 q0 = w4[base + c], q1 = w4[base + c + width], q2 = w4[base + c + 2u * width],
                                q3 = w4[base + c + 3u * width];
                    acc += term(q0, (xb + c * per) / 4u);
                    acc += term(q1, (xb + (c + width) * per) / 4u);
                    acc += term(q2, (xb + (c + 2u * width) * per) / 4u);
                    acc += term(q3, (xb + (c + 3u * width) * per) / 4u);
                }
                for (; c < n; c += width) acc += term(w4[base + c], (xb + c * per) / 4u);
            } else {
                for (uint i = lane; i < p.I; i += width) acc += weight(row + i) * act(xb + i);
            }
            acc = subgroupAdd(acc);
            if (lane == 0) y[p.y_off + s * p.y_stride + o] = acc;
        }
    }
}
