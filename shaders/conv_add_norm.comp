// A decode row's block tail in one dispatch: the short conv of a (sconv.comp's, the residual
// inside, its state advanced), the residual add x += conv(a) (ew.comp's ADD), then
// h = rmsnorm(x) ⊙ weight (rmsnorm.comp's) — three dispatches and two barriers of the
// unfused path. One workgroup: the span's one row (a span of one row reads no other row's
// input, so the state is this workgroup's alone). The same float operations in the same
// order as the three shaders: the conv's taps oldest first then the raw input, raw + acc;
// the lanes' strided squares, subgroupAdd, the subgroups' partials in order; so the bits
// are the unfused path's.
// K > 0: the conv's input is the MoE layer's output, joined here as moe_join.comp joins it —
// Σ_k w[row][k]·y[row·K + k] + Σ_j sw[row][j]·shared[j][row] in its order — instead of read
// from a (the join's dispatch and barrier saved too; a is not written).
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;  // rmsnorm.comp's: the same partial sums
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
shared float partial[32];
const uint B = 4u;  // channels a lane keeps in flight

void main() {
    const uint lane = gl_LocalInvocationID.x;
    const uint subgroups = (gl_WorkGroupSize.x + gl_SubgroupSize - 1) / gl_SubgroupSize;
    const uint taps = p.kernel - 1u, xb = p.row * p.channels;
    // A lane's channels lane, lane + 128, … in batches of B, every load of a batch issued
    // before its arithmetic (one workgroup walking the channels a load at a time waited on
    // each); the arithmetic and the order of the squares' sum are unchanged.
    float acc2 = 0.0;
    for (uint base = 0; base < p.channels; base += 128u * B) {
        float raw[B], xv[B], w[B][9], hist[B][8];
        for (uint k = 0; k < B; ++k) {
            const uint c = base + lane + 128u * k;
            if (c >= p.channels) break;
            raw[k] = input_at(c);
            xv[k] = x[xb + c];
            for (uint j = 0; j < p.kernel; ++j) w[k][j] = wc[c * p.kernel + j];
            for (uint j = 0; j < taps; ++j) hist[k][j] = st[p.st_off + c * taps + j];
        }
        for (uint k = 0; k < B; ++k) {
            const uint c = base + lane + 128u * k;
            if (c >= p.channels) break;
            float acc = 0.0;
            for (uint j = 0; j < taps; ++j) acc += w[k][j] * hist[k][j];
            acc += w[k][taps] * raw[k];
            for (uint j = 0; j + 1u < taps; ++j) st[p.st_off + c * taps + j] = hist[k][j + 1u];
            if (taps > 0u) st[p.st_off + c * taps + taps - 1u] = raw[k];
            const float v = xv[k] + (raw[k] + acc);
            x[xb + c] = v;
            acc2 += v * v;
        }
    }
    acc2 = subgroupAdd(acc2);
    if (gl_SubgroupInvocationID == 0) partial[gl_SubgroupID] = acc2;
    barrier();
    float total = 0.0;
    for (uint s = 0; s < subgroups; ++s) total += partial[s];
    const float inv = 1.0 / sqrt(total / float(p.channels) + p.eps);
    for (uint base = 0; base < p.channels; base += 128u * B) {
        float v[B], w[B];
        for (uint k = 0; k < B; ++k) {
            const uint c = base + lane + 128u * k;
            v[k] = c < p.channels ? x[xb + c] : 0.0;
            w[k] = c < p.channels ? wn[c] : 0.0;
        }
        for (uint k = 0; k < B; ++k) {
            const uint c = base + lane + 128u * k;
            if (c < p.channels) h[xb + c] = v[k] * inv * w[k];
        }
    }
}
