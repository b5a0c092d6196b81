// The MoE router's top-k on the device (resident layers: every routed expert on the
// device, so no host round trip): per row, choice(e) = sigmoid(logit e) + bias e, the K
// best in turn (ties to the lowest id), combine weights sigmoid(logit)·scale / z with z the
// sum of the chosen and the shared experts' sigmoids (in the CPU's order: chosen in
// selection order, then shared). The row's K pairs are written in increasing expert id —
// the order the CPU sums routed contributions in. One workgroup a row: its invocations
// compute every expert's sigmoid and choice at once, then one picks the K best from
// shared memory.
// D > 0: the row's router logits are computed here from h and the router matrix (FORMAT
// 0 f32, 1 bf16), each expert's by one subgroup as gemv.comp computes a row (its lanes'
// 16-byte loads in order, subgroupAdd) — the same bits as the router's gemv, without its
// dispatch and the barrier after it. For routers small enough that one workgroup reads
// them in less time than a dispatch takes (Ops::router_fits).
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require
#include "pointwise.glsl"
layout(local_size_x_id = 1) in;  // 256, or 1024 where the device allows (Ops): more subgroups for the logits
layout(constant_id = 0) const uint FORMAT = 0;
layout(std430, set = 0, binding = 0) readonly buffer Logits { float lg[]; };   // [R][E+NS]
layout(std430, set = 0, binding = 1) readonly buffer Bias { float bias[]; };   // [E]
layout(std430, set = 0, binding = 2) writeonly buffer RouteE { uint re[]; };   // [R][K]
layout(std430, set = 0, binding = 3) writeonly buffer RouteW { float rw[]; };  // [R][K]
layout(std430, set = 0, binding = 4) writeonly buffer SharedW { float sw[]; }; // [R][NS]
layout(std430, set = 0, binding = 5) readonly buffer W4 { uvec4 w4[]; };       // D > 0: [E+NS][D]
layout(std430, set = 0, binding = 6) readonly buffer X4 { vec4 x4[]; };        // D > 0: h [R][D]
layout(push_constant) uniform Push { uint R, E, NS, K; float scale; uint D; } p;

const uint kMaxE = 1024;  // the chain declines more experts
shared float sig[kMaxE], choice[kMaxE];
shared float slog[kMaxE + 16];  // D > 0: the row's logits (shared experts after the routed)

float term(uvec4 q, uint xi) {
    if (FORMAT == 0) return dot(uintBitsToFloat(q), x4[xi]);
    const vec4 lo = uintBitsToFloat(q << 16), hi = uintBitsToFloat(q & 0xffff0000u);
    return dot(vec4(lo.x, hi.x, lo.y, hi.y), x4[xi]) + dot(vec4(lo.z, hi.z, lo.w, hi.w), x4[xi + 1]);
}

// Logit e of the row as gemv.comp's subgroup makes it (a 16-byte-aligned row, D a multiple
// of 8: Ops::router_fits).
float logit(uint row, uint e) {
    const uint per = FORMAT == 0 ? 4u : 8u, n = p.D / per, base = e * n, xb = row * p.D;
    const uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
    float acc = 0.0;
    uint c = lane;
    for (; c + 3u * width < n; c += 4u * width) {  // four loads in flight, summed in order (gemv.comp's)
        const uvec4 q0 = w4[base + c], q1 = w4[base + c + width], q2 = w4[base + c + 2u * width],
                    q3 = w4[base + c + 3u * width];
        acc += term(q0, (xb + c * per) / 4u);
        acc += term(q1, (xb + (c + width) * per) / 4u);
        acc += term(q2, (xb + (c + 2u * width) * per) / 4u);
        acc += term(q3, (xb + (c + 3u * width) * per) / 4u);
    }
    for (; c < n; c += width) acc += term(w4[base + c], (xb + c * per) / 4u);
    return subgroupAdd(acc);
}
shared uint taken[kMaxE / 32];


void main() {
    const uint row = gl_WorkGroupID.x;
    if (row >= p.R) return;
    const uint lane = gl_LocalInvocationID.x;
    const uint lb = row * (p.E + p.NS);
    if (p.D > 0u) {
        for (uint e = gl_SubgroupID; e < p.E + p.NS; e += gl_NumSubgroups) {
            const float v = logit(row, e);
            if (gl_SubgroupInvocationID == 0) slog[e] = v;
        }
        barrier();
    }
    for (uint e = lane; e < p.E; e += gl_WorkGroupSize.x) {
        sig[e] = sigmoid_of(p.D > 0u ? slog[e] : lg[lb + e]);
        choice[e] = sig[e] + bias[e];
    }
    for (uint w = lane; w < (p.E + 31u) / 32u; w += gl_WorkGroupSize.x) taken[w] = 0u;
    barrier();
    if (lane != 0u) return;
    uint chosen[16];  // K ≤ 16 (the chain declines more)
    float z = 0.0;
    for (uint k = 0; k < p.K; ++k) {
        uint best = 0xffffffffu;
        float bv = 0.0;
        for (uint e = 0; e < p.E; ++e) {
            if ((taken[e >> 5] & (1u << (e & 31u))) != 0u) continue;
            if (best == 0xffffffffu || choice[e] > bv) { best = e; bv = choice[e]; }
        }
        taken[best >> 5] |= 1u << (best & 31u);
        chosen[k] = best;
        z += sig[best];
    }
    for (uint j = 0; j < p.NS; ++j) z += sigmoid_of(p.D > 0u ? slog[p.E + j] : lg[lb + p.E + j]);
    const float scale = p.scale * reciprocal_positive(z);  // as the CPU: no `/`
    // Increasing expert id (insertion sort of K ids).
    for (uint a = 1; a < p.K; ++a) {
        const uint v = chosen[a];
        uint b = a;
        for (; b > 0 && chosen[b - 1] > v; --b) chosen[b] = chosen[b - 1];
        chosen[b] = v;
    }
    for (uint k = 0; k < p.K; ++k) {
        re[row * p.K + k] = chosen[k];
        rw[row * p.K + k] = sig[chosen[k]] * scale;
    }
    for (uint j = 0; j < p.NS; ++j) sw[row * p.NS + j] = sigmoid_of(p.D > 0u ? slog[p.E + j] : lg[lb + p.E + j]) * scale;
}
