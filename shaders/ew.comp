// Element-wise steps of the chain over `n` floats.
// op 0 ADD:     a[i] += b[i]
// op 1 SWIGLU:  a[i] = silu(a[i]) · b[i]
// op 2 SCALE:   a[i] *= scale
// op 3 COMBINE: a[i] = b[i] + Σ_j w[row][j] · c[j][i]   (the MoE output: the routed sum
//               from the host plus the shared experts times their combine weights, summed
//               on their own first, as the CPU does; rows of `width` floats)
#version 450
#extension GL_GOOGLE_include_directive : require
#include "pointwise.glsl"
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer C { float c[]; };
layout(std430, set = 0, binding = 3) readonly buffer Wc { float wc[]; };
layout(push_constant) uniform Push { uint op, n, width, shared_n; float scale; } p;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        if (p.op == 0u) a[i] += b[i];
        else if (p.op == 1u) { const float g = a[i]; a[i] = swiglu_of(g, b[i]); }
        else if (p.op == 2u) a[i] *= p.scale;
        else {
            const uint row = i / p.width;
            float s = 0.0;
            for (uint j = 0; j < p.shared_n; ++j) s += wc[row * p.shared_n + j] * c[j * p.n + i];
            a[i] = p.shared_n > 0u ? b[i] + s : b[i];
        }
    }
}
