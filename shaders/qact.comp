// Activations quantized for integer weights, as quant::quantize_activations does on the host
// (engine/quant/quantize.h, docs/container.md): each of `rows` rows of `cols` floats in blocks
// of 32, s = max|x| / 127, q = round(x / s) with ties away from zero, clamped to ±127 (s = 0
// and q = 0 for an all-zero block), the padded tail 0. One invocation a (row, block).
//
// The host divides in IEEE f32 (correctly rounded); a GPU's `/` need not be (2.5 ulp in
// Vulkan), so div_rn finds the correctly rounded quotient exactly: a candidate from a double
// division, then of it and its two neighbours the one with the least |a − c·b|, computed
// exactly in double (c·b has 48 bits; a − c·b spans under 53). So q and s are the host's bits.
// swiglu 1: x holds gate rows and each value is silu(x)·u first (the up rows at x's offsets),
// as ew.comp's SWIGLU computes it: the down projection's activations without a SwiGLU pass.
#version 450
#extension GL_ARB_gpu_shader_fp64 : enable
#extension GL_GOOGLE_include_directive : require
#include "pointwise.glsl"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Q { uint q[]; };   // [rows][blocks·8]: 4 int8 a word, low byte first
layout(std430, set = 0, binding = 2) writeonly buffer S { float s[]; };  // [rows][blocks]
layout(std430, set = 0, binding = 3) readonly buffer U { float u[]; };    // swiglu: the up rows
layout(push_constant) uniform Push {
    uint rows, cols, blocks;  // blocks = padded cols / 32
    uint x_off, x_stride;     // first float of x, floats between its rows
    uint swiglu;
} p;

float act(uint i) {
    const float g = x[i];
    return p.swiglu != 0u ? swiglu_of(g, u[i]) : g;
}

float next_toward(float f, float to) {
    if (f == to) return f;
    if (f == 0.0) return to > 0.0 ? uintBitsToFloat(1u) : uintBitsToFloat(0x80000001u);
    const uint bits = floatBitsToUint(f);
    return uintBitsToFloat((to > f) == (f > 0.0) ? bits + 1u : bits - 1u);
}

// a / b correctly rounded to f32, for b > 0 finite.
float div_rn(float a, float b) {
    const float c = float(double(a) / double(b));
    float best = c;
    precise double err = abs(double(a) - double(c) * double(b));
    for (int k = 0; k < 2; ++k) {
        const float n = next_toward(c, k == 0 ? -1.0 / 0.0 : 1.0 / 0.0);
        precise double e = abs(double(a) - double(n) * double(b));
        if (e < err) best = n, err = e;
    }
    return best;
}

// round(v) ties away from zero, within ±127; v - trunc(v) is exact in f32.
int round_away(float v) {
    precise float t = trunc(v);
    precise float f = v - t;
    if (abs(f) >= 0.5) t += sign(v);
    return int(clamp(t, -127.0, 127.0));
}

void main() {
    const uint total = p.rows * p.blocks;
    for (uint at = gl_GlobalInvocationID.x; at < total; at += gl_NumWorkGroups.x * 64u) {
        const uint row = at / p.blocks, b = at % p.blocks;
        const uint begin = b * 32u, n = begin < p.cols ? min(32u, p.cols - begin) : 0u;
        const uint xb = p.x_off + row * p.x_stride + begin;
        float m = 0.0;
        for (uint i = 0; i < n; ++i) m = max(m, abs(act(xb + i)));
        const float sc = m == 0.0 ? 0.0 : div_rn(m, 127.0);
        s[at] = sc;
        for (uint w = 0; w < 8u; ++w) {
            uint word = 0u;
            for (uint k = 0; k < 4u; ++k) {
                const uint i = w * 4u + k;
                const int v = (i < n && sc != 0.0) ? round_away(div_rn(act(xb + i), sc)) : 0;
                word |= (uint(v) & 0xffu) << (8u * k);
            }
            q[at * 8u + w] = word;
        }
    }
}
