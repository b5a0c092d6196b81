// A decode row's block tail in one dispatch: the short conv of a (sconv.comp's, the residual
// inside, its state advanced), the residual add x += conv(a) (ew.comp's ADD), then
// h = rmsnorm(x) ⊙ weight (rmsnorm.comp's) — three dispatches and two barriers of the
// unfused path. One workgroup: the span's one row (a span of one row reads no other row's
// input, so the state is this workgroup's alone). The same float operations in the same
// order as the three shaders: the conv's taps oldest first then the raw input, raw + acc;
// the norm as rmsnorm.comp computes it, its lanes' partial sums grouped by this shader's
// workgroup size.
// K > 0: the conv's input is the MoE layer's output, joined here as moe_join.comp joins it —
// Σ_k w[row][k]·y[row·K + k] + Σ_j sw[row][j]·shared[j][row] in its order — instead of read
// from a (the join's dispatch and barrier saved too; a is not written).
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
// As many lanes as the device allows, up to 1024 (specialization constant 0, Ops): one
// workgroup walking a row of D with 128 lanes waited on a channel's loads D/128 times in
// turn (16.6 µs a dispatch on the H200 at D = 1024). The conv and the add are per element,
// so x and the state are the unfused path's bits; the norm's sum of squares groups the
// lanes' partials differently from rmsnorm.comp's 128 (within float rounding of it).
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };               // [R][D], += conv(a)
layout(std430, set = 0, binding = 1) readonly buffer A { float a[]; };      // [R][D], the conv's input
layout(std430, set = 0, binding = 2) readonly buffer Wc { float wc[]; };    // [D][kernel]
layout(std430, set = 0, binding = 3) buffer State { float st[]; };          // [D][kernel − 1] at st_off
layout(std430, set = 0, binding = 4) readonly buffer Wn { float wn[]; };    // [D]
layout(std430, set = 0, binding = 5) writeonly buffer H { float h[]; };     // [R][D]
layout(std430, set = 0, binding = 6) readonly buffer Y { float y[]; };         // K > 0: [R·K][D]
layout(std430, set = 0, binding = 7) readonly buffer RouteW { float rw[]; };   // [R][K]
layout(std430, set = 0, binding = 8) readonly buffer Shared { float sh[]; };   // [NS][R·D]
layout(std430, set = 0, binding = 9) readonly buffer SharedW { float sw[]; };  // [R][NS]
layout(push_constant) uniform Push {
    uint row, channels, kernel, st_off;
    float eps;
    uint K, NS, n;  // the join (K > 0): pairs and shared experts a row, floats of shared's slices
} p;

// The conv's input at channel c of the row: a, or the MoE join (moe_join.comp's sums).
float input_at(uint c) {
    if (p.K == 0u) return a[p.row * p.channels + c];
    const uint i = p.row * p.channels + c;
    float r = 0.0;
    for (uint k = 0; k < p.K; ++k) r += rw[p.row * p.K + k] * y[(p.row * p.K + k) * p.channels + c];
    float s = 0.0;
    for (uint j = 0; j < p.NS; ++j) s += sw[p.row * p.NS + j] * sh[j * p.n + i];
    return p.NS > 0u ? r + s : r;
}
shared float partial[256];  // a subgroup's partial: 1024 lanes in subgroups of 4 at least

void main() {
    const uint lane = gl_LocalInvocationID.x;
    const uint subgroups = (gl_WorkGroupSize.x + gl_SubgroupSize - 1) / gl_SubgroupSize;
    const uint taps = p.kernel - 1u, xb = p.row * p.channels;
    float acc2 = 0.0;
    for (uint c = lane; c < p.channels; c += gl_WorkGroupSize.x) {
        const float raw = input_at(c);
        float acc = 0.0;
        for (uint j = 0; j < taps; ++j) acc += wc[c * p.kernel + j] * st[p.st_off + c * taps + j];
        acc += wc[c * p.kernel + taps] * raw;
        for (uint j = 0; j + 1u < taps; ++j) st[p.st_off + c * taps + j] = st[p.st_off + c * taps + j + 1u];
        if (taps > 0u) st[p.st_off + c * taps + taps - 1u] = raw;
        const float v = x[xb + c] + (raw + acc);
        x[xb + c] = v;
        acc2 += v * v;
    }
    acc2 = subgroupAdd(acc2);
    if (gl_SubgroupInvocationID == 0) partial[gl_SubgroupID] = acc2;
    barrier();
    float total = 0.0;
    for (uint s = 0; s < subgroups; ++s) total += partial[s];
    const float inv = 1.0 / sqrt(total / float(p.channels) + p.eps);
    for (uint c = lane; c < p.channels; c += gl_WorkGroupSize.x) h[xb + c] = x[xb + c] * inv * wn[c];
}
