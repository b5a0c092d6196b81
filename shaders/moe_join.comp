// A MoE layer's output from its pairs: a[row][d] = Σ_k w[row][k]·y[row·K + k][d] (the row's
// pairs in increasing expert id, as the CPU sums them) + Σ_j sw[row][j]·shared[j][row][d]
// (the shared experts summed on their own first, then added).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) writeonly buffer A { float a[]; };        // [R][D]
layout(std430, set = 0, binding = 1) readonly buffer Y { float y[]; };         // [R·K][D]
layout(std430, set = 0, binding = 2) readonly buffer RouteW { float rw[]; };   // [R][K]
layout(std430, set = 0, binding = 3) readonly buffer Shared { float sh[]; };   // [NS][R·D]
layout(std430, set = 0, binding = 4) readonly buffer SharedW { float sw[]; };  // [R][NS]
layout(push_constant) uniform Push { uint n, D, K, NS; } p;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        const uint row = i / p.D, d = i % p.D;
        float r = 0.0;
        for (uint k = 0; k < p.K; ++k) r += rw[row * p.K + k] * y[(row * p.K + k) * p.D + d];
        float s = 0.0;
        for (uint j = 0; j < p.NS; ++j) s += sw[row * p.NS + j] * sh[j * p.n + i];
        a[i] = p.NS > 0u ? r + s : r;
    }
}
