// Inkling attention split over positions for decode (flash-decoding), first half: the
// scores and softmax of relattn.comp — score(t) = (q·k_t / hd + bias(p − t)) · tau over the
// visible positions (a sliding window of W, or everything from lo on a global layer), keys
// of the span from its fresh rows, older ones from the mirror ring [kv_heads][mrows][hd] —
// but each workgroup takes one chunk of `chunk` consecutive visible positions of one
// (row, head): grid x the span's rows × heads, y the `chunks` chunks. It writes its chunk's
// statistics, unnormalised, to the partials [srow·H + h][chunk][hd + 2]: max m, sum
// l = Σ e^{s−m}, then hd floats Σ e^{s−m}·v_t. A chunk past the row's visible positions
// (the span's earlier rows see fewer) writes m = −inf, l = 0 and zeros. relattn_merge.comp
// joins the chunks, with the host's statistics on a split layer.
//
// Positions go by tiles of 64, the lanes in 4 groups of 32, a group over 16 of the tile's
// positions. The q·k dots: a group's lanes over one key's hd consecutive floats (lane i
// has dims i, i + 32, … up to NU of them, NU = ⌈hd / 32⌉ a specialization constant: 1, 2,
// 4 or 8), the 32 partial sums joined in shared memory; then the tile's softmax online, as
// relattn.comp's; then Σ e·v, a lane over the same dims of its group's positions, the
// groups' sums joined at the end. The loops have constant bounds and no branch around a
// load (positions past the tile's end read its last one, weighted 0; dims past hd read the
// last one, times a q of 0 or never stored), and a tile wholly in the mirror (all but the
// last at decode) takes a path that reads only the mirror, its ring row counted on
// rather than divided: so the GPU has a lane's loads in flight together, not one after
// another. Reductions across the workgroup go through shared memory per subgroup, right
// for any subgroup size.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint NU = 8;  // dims a lane: ⌈hd / 32⌉ rounded up to 1, 2, 4, 8
layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };      // [R][H][hd]
layout(std430, set = 0, binding = 1) readonly buffer Kf { float kf[]; };    // [R][KV][hd]
layout(std430, set = 0, binding = 2) readonly buffer Vf { float vf[]; };
layout(std430, set = 0, binding = 3) readonly buffer Km { float km[]; };    // mirror
layout(std430, set = 0, binding = 4) readonly buffer Vm { float vm[]; };
layout(std430, set = 0, binding = 5) readonly buffer Rr { float rr[]; };    // [R][H][d_rel]
layout(std430, set = 0, binding = 6) readonly buffer Bank { float bank[]; };// [d_rel][ext]
layout(std430, set = 0, binding = 7) writeonly buffer Part { float part[]; };
layout(std430, set = 0, binding = 8) readonly buffer Tau { float tau[]; };  // [R]
layout(push_constant) uniform Push {
    uint first, rows, pos0;   // the span: batch rows [first, first+rows) at positions pos0…
    uint H, KV, hd, d_rel, ext;
    uint window;              // 0: global
    uint mrows;               // mirror rows (a ring on local and split global layers)
    uint lo;                  // first position the device attends (the host did the rest)
    float inv_hd;
    uint chunk, chunks;       // visible positions a chunk, chunks a (row, head)
} p;

const uint T = 64u;          // positions a tile
const uint G = 4u;           // lane groups of 32
shared float dots[T * 33u];  // [position][lane of its group], rows padded by one
shared float prob[T];
shared float accs[G * 256u];  // [lane group][hd]: the groups' Σ e·v at the end
shared float red[32];
shared float rs[64];  // the row's r for this head, [d_rel]

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

// The score of position t of the tile (lane < count): its joined dot, the bias, tau.
float score(uint lane, uint dist, uint rb, float tr) {
    float d = 0.0;
    for (uint e = 0; e < 32u; ++e) d += dots[lane * 33u + e];
    float bias = 0.0;
    if (dist < p.ext)
        for (uint e0 = 0; e0 < p.d_rel; e0 += 8u)
            for (uint e = e0; e < e0 + 8u; ++e) bias += rs[e] * bank[min(e, p.d_rel - 1u) * p.ext + dist];
    return (d * p.inv_hd + bias) * tr;
}

void main() {
    const uint job = gl_WorkGroupID.x, c = gl_WorkGroupID.y;
    const uint srow = job / p.H, h = job % p.H;
    if (srow >= p.rows) return;
    const uint row = p.first + srow, g = h / (p.H / p.KV);
    const uint pos = p.pos0 + srow;
    const uint t0 = max(p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u, p.lo);
    const uint n = pos - t0 + 1u;
    const uint qb = (row * p.H + h) * p.hd, rb = (row * p.H + h) * p.d_rel;
    const float tr = tau[row];
    const uint lane = gl_LocalInvocationID.x, grp = lane / 32u, sl = lane % 32u, last = p.hd - 1u;
    const uint begin = c * p.chunk, end = min(begin + p.chunk, n);  // end < begin: an empty chunk

    if (lane < 64u) rs[lane] = lane < p.d_rel ? rr[rb + lane] : 0.0;
    float qr[8];  // this lane's dims of q: sl + 32·u, 0 past hd
    for (uint u = 0; u < NU; ++u) qr[u] = sl + 32u * u < p.hd ? q[qb + sl + 32u * u] : 0.0;
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    float m = -1.0 / 0.0, l = 0.0;
    const uint mb = g * p.mrows * p.hd;  // this KV head's mirror
    for (uint base = begin; base < end; base += T) {
        const uint count = min(T, end - base), ta = t0 + base;
        const bool mirror = ta + count <= p.pos0;  // every position of the tile in the mirror
        const uint r0 = ta % p.mrows;              // its first position's ring row
        if (mirror) {
            for (uint i = 0; i < T / G; ++i) {
                uint r = r0 + min(grp + G * i, count - 1u);
                r = r >= p.mrows ? r - p.mrows : r;
                const uint kb = mb + r * p.hd;
                float d = 0.0;
                for (uint u = 0; u < NU; ++u) d += qr[u] * km[kb + min(sl + 32u * u, last)];
                dots[(grp + G * i) * 33u + sl] = d;
            }
        } else {
            for (uint i = 0; i < T / G; ++i) {
                const uint t = ta + min(grp + G * i, count - 1u);
                float d = 0.0;
                if (t >= p.pos0) {
                    const uint kb = ((p.first + t - p.pos0) * p.KV + g) * p.hd;
                    for (uint u = 0; u < NU; ++u) d += qr[u] * kf[kb + min(sl + 32u * u, last)];
                } else {
                    const uint kb = mb + (t % p.mrows) * p.hd;
                    for (uint u = 0; u < NU; ++u) d += qr[u] * km[kb + min(sl + 32u * u, last)];
                }
                dots[(grp + G * i) * 33u + sl] = d;
            }
        }
        barrier();
        const float sc = lane < count ? score(lane, pos - (ta + lane), rb, tr) : -1.0 / 0.0;
        const float mnew = max(m, wg_max(sc));
        const float e = lane < count ? exp(sc - mnew) : 0.0;
        if (lane < T) prob[lane] = e;   // 0 past the tile's end
        const float f = exp(m - mnew);  // 0 on the first tile (m = −inf)
        l = l * f + wg_sum(e);          // its barriers also publish prob
        m = mnew;
        for (uint u = 0; u < NU; ++u) acc[u] *= f;
        if (mirror) {
            for (uint i = 0; i < T / G; ++i) {
                const uint j = grp + G * i;
                uint r = r0 + min(j, count - 1u);
                r = r >= p.mrows ? r - p.mrows : r;
                const uint vb = mb + r * p.hd;
                const float w = prob[j];
                for (uint u = 0; u < NU; ++u) acc[u] += w * vm[vb + min(sl + 32u * u, last)];
            }
        } else {
            for (uint i = 0; i < T / G; ++i) {
                const uint j = grp + G * i, t = ta + min(j, count - 1u);
                const float w = prob[j];
                if (t >= p.pos0) {
                    const uint vb = ((p.first + t - p.pos0) * p.KV + g) * p.hd;
                    for (uint u = 0; u < NU; ++u) acc[u] += w * vf[vb + min(sl + 32u * u, last)];
                } else {
                    const uint vb = mb + (t % p.mrows) * p.hd;
                    for (uint u = 0; u < NU; ++u) acc[u] += w * vm[vb + min(sl + 32u * u, last)];
                }
            }
        }
        barrier();  // before the next tile's dots and prob
    }
    for (uint u = 0; u < NU; ++u)
        if (sl + 32u * u < p.hd) accs[grp * p.hd + sl + 32u * u] = acc[u];
    barrier();
    const uint pb = ((srow * p.H + h) * p.chunks + c) * (p.hd + 2u);
    if (lane == 0u) {
        part[pb] = m;
        part[pb + 1u] = l;
    }
    for (uint dim = lane; dim < p.hd; dim += 128u) {
        float a = 0.0;
        for (uint s = 0; s < G; ++s) a += accs[s * p.hd + dim];
        part[pb + 2u + dim] = a;
    }
}
