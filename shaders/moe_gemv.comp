// The routed experts' projections over (row, expert) pairs: for pair q, expert e = route[q]
// held in device slot s = slots[e], y[q][o] = Σ_i W_s[o][i] · x[q / x_div][i]. The weights of
// slots [s_first, s_first + s_count) lie packed in this binding (O×I elements each); pairs
// whose expert sits in another chunk, or on the host (slot ~0), are left alone. One
// subgroup an output row as in gemv.comp; the grid's y is the pair.
// FORMAT (specialization constant 0): 0 f32, 1 bf16 weights (two a uint, even element low).
// swiglu 1: x holds the pairs' gate rows and each activation is silu(x)·u (the up rows at the
// same offsets), as ew.comp's SWIGLU — the down projection without a SwiGLU pass before it.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require
#include "pointwise.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint FORMAT = 0;

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 3) readonly buffer Route { uint route[]; };  // [pairs]
layout(std430, set = 0, binding = 4) readonly buffer Slots { uint slots[]; };  // [E]
layout(std430, set = 0, binding = 5) readonly buffer U { float u[]; };         // swiglu: the up rows
layout(std430, set = 0, binding = 5) readonly buffer U4 { vec4 u4[]; };
layout(push_constant) uniform Push {
    uint O, I, pairs, x_div;
    uint s_first, s_count;
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
float term(uvec4 v, uint xi) {
    if (FORMAT == 0) return dot(uintBitsToFloat(v), act4(xi));
    const vec4 lo = uintBitsToFloat(v << 16), hi = uintBitsToFloat(v & 0xffff0000u);
    return dot(vec4(lo.x, hi.x, lo.y, hi.y), act4(xi)) + dot(vec4(lo.z, hi.z, lo.w, hi.w), act4(xi + 1));
}

float weight(uint e) {
    if (FORMAT == 0) return uintBitsToFloat(w[e]);
    const uint word = w[e >> 1];
    return uintBitsToFloat((e & 1u) == 0u ? word << 16 : word & 0xffff0000u);
}

void main() {
    const uint q = gl_WorkGroupID.y;
    if (q >= p.pairs) return;
    const uint s = slots[route[q]];
    if (s < p.s_first || s >= p.s_first + p.s_count) return;
    const uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
    const uint per = FORMAT == 0 ? 4u : 8u;
    const bool wide = p.I % per == 0;
    const uint xb = (q / p.x_div) * p.I;
    for (uint o = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; o < p.O;
         o += gl_NumWorkGroups.x * gl_NumSubgroups) {
        const uint row = ((s - p.s_first) * p.O + o) * p.I;
        float acc = 0.0;
        if (wide) {
            // Four loads in flight a lane, summed in the one-load loop's order (gemv.comp).
            const uint base = row / per, n = p.I / per;
            uint c = lane;
            for (; c + 3u * width < n; c += 4u * width) {
                const uvec4 v0 = w4[base + c], v1 = w4[base + c + width], v2 = w4[base + c + 2u * width],
                            v3 = w4[base + c + 3u * width];
                acc += term(v0, (xb + c * per) / 4u);
                acc += term(v1, (xb + (c + width) * per) / 4u);
                acc += term(v2, (xb + (c + 2u * width) * per) / 4u);
                acc += term(v3, (xb + (c + 3u * width) * per) / 4u);
            }
            for (; c < n; c += width) acc += term(w4[base + c], (xb + c * per) / 4u);
        } else {
            for (uint i = lane; i < p.I; i += width) acc += weight(row + i) * act(xb + i);
        }
        acc = subgroupAdd(acc);
        if (lane == 0) y[q * p.O + o] = acc;
    }
}
