// Inkling attention split over positions for decode, second half: one workgroup per
// (row, head) joins relattn_split.comp's chunks — partials [srow·H + h][chunk][hd + 2] of
// max m_c, sum l_c and the unnormalised Σ e·v — by their softmax statistics:
// M = max_c m_c, L = Σ_c l_c·e^{m_c − M}, out = Σ_c acc_c·e^{m_c − M} / L. On a split
// global layer (lo > 0) the host's statistics over positions [0, lo) (relattn.comp's
// HostPart, per batch row) are one chunk more. Empty chunks (m = −inf, l = 0) weigh 0.
// Writes only the span's output rows. The lanes in 4 groups of 32, a group over every
// fourth chunk, a lane over dims i, i + 32, … (NU of them, as relattn_split.comp's: no
// branch around a load), the groups' sums joined in shared memory.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint NU = 8;  // dims a lane: ⌈hd / 32⌉ rounded up to 1, 2, 4, 8
layout(std430, set = 0, binding = 0) readonly buffer Part { float part[]; };
layout(std430, set = 0, binding = 1) readonly buffer HostPart { float hp[]; };  // [R][H][hd + 2]
layout(std430, set = 0, binding = 2) writeonly buffer Out { float o[]; };       // [R][H][hd]
layout(push_constant) uniform Push {
    uint first, rows, pos0;
    uint H, KV, hd, d_rel, ext;
    uint window, mrows, lo;
    float inv_hd;
    uint chunk, chunks;
} p;

const uint G = 4u;  // lane groups of 32
shared float red[32];
shared float accs[G * 256u];  // [lane group][hd]

float wg_max(float v) {
    v = subgroupMax(v);
    if (gl_SubgroupInvocationID == 0) red[gl_SubgroupID] = v;
    barrier();
    float m = red[0];
    for (uint s = 1; s < gl_NumSubgroups; ++s) m = max(m, red[s]);
    barrier();
    return m;
}
float wg_sum(float v) {
    v = subgroupAdd(v);
    if (gl_SubgroupInvocationID == 0) red[gl_SubgroupID] = v;
    barrier();
    float m = 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) m += red[s];
    barrier();
    return m;
}

void main() {
    const uint job = gl_WorkGroupID.x;
    const uint srow = job / p.H, h = job % p.H;
    if (srow >= p.rows) return;
    const uint row = p.first + srow, lane = gl_LocalInvocationID.x, grp = lane / 32u, sl = lane % 32u;
    const uint stride = p.hd + 2u, jb = (srow * p.H + h) * p.chunks * stride;
    const uint hb = (row * p.H + h) * stride;
    const bool host = p.lo > 0u;

    float m = host && lane == 0u ? hp[hb] : -1.0 / 0.0;
    for (uint c = lane; c < p.chunks; c += 128u) m = max(m, part[jb + c * stride]);
    const float M = wg_max(m);
    float l = host && lane == 0u ? hp[hb + 1u] * exp(hp[hb] - M) : 0.0;
    for (uint c = lane; c < p.chunks; c += 128u) l += part[jb + c * stride + 1u] * exp(part[jb + c * stride] - M);
    const float L = wg_sum(l);

    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    const uint last = p.hd - 1u;
    if (host && grp == 0u) {
        const float w = exp(hp[hb] - M);
        for (uint u = 0; u < NU; ++u) acc[u] = hp[hb + 2u + min(sl + 32u * u, last)] * w;
    }
    for (uint c = grp; c < p.chunks; c += G) {
        const uint cb = jb + c * stride;
        const float w = exp(part[cb] - M);
        for (uint u = 0; u < NU; ++u) acc[u] += part[cb + 2u + min(sl + 32u * u, last)] * w;
    }
    for (uint u = 0; u < NU; ++u)
        if (sl + 32u * u < p.hd) accs[grp * p.hd + sl + 32u * u] = acc[u];
    barrier();
    for (uint dim = lane; dim < p.hd; dim += 128u) {
        float a = 0.0;
        for (uint s = 0; s < G; ++s) a += accs[s * p.hd + dim];
        o[(row * p.H + h) * p.hd + dim] = a / L;
    }
}
