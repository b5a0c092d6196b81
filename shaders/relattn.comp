// Inkling attention for one session's span of rows: per (row, head) one workgroup.
// score(t) = (q·k_t / hd + bias(p − t)) · tau, bias(e) = Σ_d r[d]·bank[d][e] for
// e < extent (else 0), softmax over the visible positions (a sliding window of W on local
// layers, everything on global ones), output Σ p_t·v_t. Keys of the span itself come from
// the fresh rows (so a span that wraps the ring loses nothing); older ones from the
// device's mirror of the K/V cache: [kv_heads][mrows][hd], position t at row t % mrows.
// The softmax runs online over tiles of 128 positions. tau comes per row from the host
// (computed there in double, as the CPU does).
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };      // [R][H][hd]
layout(std430, set = 0, binding = 1) readonly buffer Kf { float kf[]; };    // [R][KV][hd]
layout(std430, set = 0, binding = 2) readonly buffer Vf { float vf[]; };
layout(std430, set = 0, binding = 3) readonly buffer Km { float km[]; };    // mirror
layout(std430, set = 0, binding = 4) readonly buffer Vm { float vm[]; };
layout(std430, set = 0, binding = 5) readonly buffer Rr { float rr[]; };    // [R][H][d_rel]
layout(std430, set = 0, binding = 6) readonly buffer Bank { float bank[]; };// [d_rel][ext]
layout(std430, set = 0, binding = 7) buffer Out { float o[]; };             // [R][H][hd]; tau in Tau
layout(std430, set = 0, binding = 8) readonly buffer Tau { float tau[]; };  // [R]
// A split global layer (the device holds only the last positions): the host's softmax
// statistics over positions [0, lo) per (row, head): max, sum, then hd unnormalised
// output floats — the online softmax starts from them instead of from nothing.
layout(std430, set = 0, binding = 9) readonly buffer HostPart { float hp[]; };
layout(push_constant) uniform Push {
    uint first, rows, pos0;   // the span: batch rows [first, first+rows) at positions pos0…
    uint H, KV, hd, d_rel, ext;
    uint window;              // 0: global
    uint mrows;               // mirror rows (a ring on local and split global layers)
    uint lo;                  // first position the device attends (the host did the rest)
    float inv_hd;
} p;

shared float prob[128];
shared float red[32];

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
    const uint row = p.first + srow, g = h / (p.H / p.KV);
    const uint pos = p.pos0 + srow;
    const uint t0 = max(p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u, p.lo);
    const uint n = pos - t0 + 1u;
    const uint qb = (row * p.H + h) * p.hd, rb = (row * p.H + h) * p.d_rel;
    const float tr = tau[row];
    const uint lane = gl_LocalInvocationID.x;

    float acc[2] = float[2](0.0, 0.0);  // this lane's output dims: lane, lane+128 (hd ≤ 256)
    float m = -1.0 / 0.0, l = 0.0;
    if (p.lo > 0u) {
        const uint hb = (row * p.H + h) * (p.hd + 2u);
        m = hp[hb];
        l = hp[hb + 1u];
        for (uint k = 0; k < 2u; ++k)
            if (lane + 128u * k < p.hd) acc[k] = hp[hb + 2u + lane + 128u * k];
    }
    for (uint base = 0; base < n; base += 128u) {
        const uint i = base + lane;
        float sc = -1.0 / 0.0;
        if (i < n) {
            const uint t = t0 + i, dist = pos - t;
            const uint kb = t >= p.pos0 ? ((p.first + t - p.pos0) * p.KV + g) * p.hd
                                        : (g * p.mrows + t % p.mrows) * p.hd;
            float d = 0.0;
            if (t >= p.pos0) for (uint e = 0; e < p.hd; ++e) d += q[qb + e] * kf[kb + e];
            else for (uint e = 0; e < p.hd; ++e) d += q[qb + e] * km[kb + e];
            float bias = 0.0;
            if (dist < p.ext) for (uint e = 0; e < p.d_rel; ++e) bias += rr[rb + e] * bank[e * p.ext + dist];
            sc = (d * p.inv_hd + bias) * tr;
        }
        const float mnew = max(m, wg_max(sc));
        const float e = i < n ? exp(sc - mnew) : 0.0;
        prob[lane] = e;
        const float f = exp(m - mnew);  // 0 on the first tile (m = −inf)
        l = l * f + wg_sum(e);
        m = mnew;
        barrier();
        const uint count = min(128u, n - base);
        for (uint k = 0; k < 2u; ++k) {
            const uint dim = lane + 128u * k;
            if (dim >= p.hd) break;
            float a = acc[k] * f;
            for (uint j = 0; j < count; ++j) {
                const uint t = t0 + base + j;
                const float vv = t >= p.pos0 ? vf[((p.first + t - p.pos0) * p.KV + g) * p.hd + dim]
                                             : vm[(g * p.mrows + t % p.mrows) * p.hd + dim];
                a += prob[j] * vv;
            }
            acc[k] = a;
        }
        barrier();
    }
    for (uint k = 0; k < 2u; ++k) {
        const uint dim = lane + 128u * k;
        if (dim < p.hd) o[qb + dim] = acc[k] / l;
    }
}
