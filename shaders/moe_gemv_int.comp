// The routed experts' projections with integer weights (a converted model's int8 or int4
// experts, docs/container.md) over (row, expert) pairs: for pair q, expert e = route[q] in
// device slot s = slots[e], y[q][o] = Σ_blocks s_w·s_x·Σ_{i in block} q_w[o][i]·q_x[i] with
// the activations x = row q / x_div of qact.comp's output. Slots [s_first, s_first + s_count)
// lie packed in the weight binding, `slot_words` apart, each O rows of `row_words` words
// (int8: 4 a word, low byte first; int4: 8 a word, element 2j in the low nibble of byte j)
// followed by the rows' scales [O][groups] (a scale covers `gblocks` blocks of 32). Pairs
// whose expert is in another chunk or on the host (slot ~0) are left alone.
//
// The float part is the CPU kernels' one pattern (engine/cpu/int_kernels.h): 16 lanes an
// output row, lane j accumulating acc_j = fma(s_w[b]·s_x[b], float(isum_b), acc_j) over the
// blocks b ≡ j (mod 16) in order, then acc[i] += acc[i + h] for h = 8, 4, 2, 1. isum is exact
// in int32 and fma_rn is a fused multiply-add computed exactly through double, so with the
// host's activations the result is the host's bits on every device (docs/vulkan.md,
// "Quantized experts"); a device without shaderFloat64 keeps the experts on the host.
// FORMAT (specialization constant 0): 0 int8, 1 int4.
#version 450
#extension GL_ARB_gpu_shader_fp64 : enable

layout(local_size_x = 128) in;  // 8 output rows × 16 lanes
layout(constant_id = 0) const uint FORMAT = 0;

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
layout(std430, set = 0, binding = 1) readonly buffer XQ4 { uvec4 xq4[]; };  // [rows][blocks·2]
layout(std430, set = 0, binding = 2) readonly buffer XS { float xs[]; };    // [rows][blocks]
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 4) readonly buffer Route { uint route[]; };  // [pairs]
layout(std430, set = 0, binding = 5) readonly buffer Slots { uint slots[]; };  // [E]
layout(push_constant) uniform Push {
    uint O, pairs, x_div;
    uint s_first, s_count;
    uint blocks, groups, gblocks;  // of a weight row: blocks of 32, scales, blocks a scale
    uint slot_words;               // a multiple of 4
} p;

shared float part[128];

// fma(a, b, c) rounded once to f32, whatever the device's fma() does: a·b is exact in double
// (48 bits), s = a·b + c rounds once more there with the exact remainder err (TwoSum), and
// rounding s to f32 equals rounding a·b + c except when s is exactly halfway between two
// floats, where err decides the side.
float fma_rn(float a, float b, float c) {
    precise double p = double(a) * double(b);
    precise double s = p + double(c);
    precise double bb = s - p;
    precise double err = (p - (s - bb)) + (double(c) - bb);
    float f = float(s);
    if (err == 0.0 || f == 0.0) return f;
    precise double df = double(f);
    if (df == s) return f;
    const uint bits = floatBitsToUint(f);
    const float g = uintBitsToFloat((s > df) == (f > 0.0) ? bits + 1u : bits - 1u);  // the other neighbour
    precise double mid = (df + double(g)) * 0.5;
    if (mid != s) return f;
    return (err > 0.0) == (double(g) > df) ? g : f;
}

int dot4(uint a, uint b) {
    return bitfieldExtract(int(a), 0, 8) * bitfieldExtract(int(b), 0, 8) +
           bitfieldExtract(int(a), 8, 8) * bitfieldExtract(int(b), 8, 8) +
           bitfieldExtract(int(a), 16, 8) * bitfieldExtract(int(b), 16, 8) +
           bitfieldExtract(int(a), 24, 8) * bitfieldExtract(int(b), 24, 8);
}

// Eight int4 weights (one word, element k in bits 4k..4k+3) against eight int8 activations.
int dot8_q4(uint a, uint x0, uint x1) {
    int sum = 0;
    for (int k = 0; k < 4; ++k) sum += bitfieldExtract(int(a), 4 * k, 4) * bitfieldExtract(int(x0), 8 * k, 8);
    for (int k = 0; k < 4; ++k) sum += bitfieldExtract(int(a), 16 + 4 * k, 4) * bitfieldExtract(int(x1), 8 * k, 8);
    return sum;
}

void main() {
    const uint q = gl_WorkGroupID.y;
    if (q >= p.pairs) return;
    const uint s = slots[route[q]];
    if (s < p.s_first || s >= p.s_first + p.s_count) return;
    const uint lane = gl_LocalInvocationID.x % 16u, r = gl_LocalInvocationID.x / 16u;
    const uint row_words = FORMAT == 0 ? p.blocks * 8u : p.blocks * 4u;
    const uint slot = (s - p.s_first) * p.slot_words;
    const uint xrow = q / p.x_div;
    const uint xq_base = xrow * p.blocks * 2u, xs_base = xrow * p.blocks;
    for (uint o0 = gl_WorkGroupID.x * 8u; o0 < p.O; o0 += gl_NumWorkGroups.x * 8u) {
        const uint o = o0 + r;
        precise float acc = 0.0;
        if (o < p.O) {
            const uint wrow = slot + o * row_words;
            const uint srow = slot + p.O * row_words + o * p.groups;
            for (uint b = lane; b < p.blocks; b += 16u) {
                const uvec4 x0 = xq4[xq_base + 2u * b], x1 = xq4[xq_base + 2u * b + 1u];
                int isum;
                if (FORMAT == 0) {
                    const uvec4 w0 = w4[(wrow + 8u * b) / 4u], w1 = w4[(wrow + 8u * b) / 4u + 1u];
                    isum = dot4(w0.x, x0.x) + dot4(w0.y, x0.y) + dot4(w0.z, x0.z) + dot4(w0.w, x0.w) +
                           dot4(w1.x, x1.x) + dot4(w1.y, x1.y) + dot4(w1.z, x1.z) + dot4(w1.w, x1.w);
                } else {
                    const uvec4 w0 = w4[(wrow + 4u * b) / 4u];
                    isum = dot8_q4(w0.x, x0.x, x0.y) + dot8_q4(w0.y, x0.z, x0.w) + dot8_q4(w0.z, x1.x, x1.y) +
                           dot8_q4(w0.w, x1.z, x1.w);
                }
                precise float d = uintBitsToFloat(w[srow + b / p.gblocks]) * xs[xs_base + b];
                acc = fma_rn(d, float(isum), acc);
            }
        }
        part[gl_LocalInvocationID.x] = acc;
        barrier();
        if (lane == 0u && o < p.O) {
            precise float a[16];
            for (uint i = 0; i < 16u; ++i) a[i] = part[r * 16u + i];
            for (uint h = 8u; h > 0u; h /= 2u)
                for (uint i = 0; i < h; ++i) a[i] = a[i] + a[i + h];
            y[q * p.O + o] = a[0];
        }
        barrier();
    }
}
