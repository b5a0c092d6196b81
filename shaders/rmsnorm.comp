// out[g] = x[g] / sqrt(mean(x[g]²) + eps) ⊙ weight over `segments` segments of `n` floats
// (a row of D, or one head of hd: the per-head q/k norms share one weight of n), each
// segment `x_stride` floats after the last; in place allowed. One workgroup a segment.
// Mode bits: 1 also multiplies by `scale` (the final norm's ÷ mup); 2 first adds the
// segment of `a` into x and writes the sum back (the residual add fused with the norm that
// reads it: one dispatch and one barrier fewer; the same float sum ew.comp's ADD makes).
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Wt { float weight[]; };
layout(std430, set = 0, binding = 2) buffer Out { float o[]; };
layout(std430, set = 0, binding = 3) readonly buffer Add { float a[]; };  // mode 2: [segments][x_stride] at x_off
layout(push_constant) uniform Push {
    uint segments, n, x_off, x_stride, o_off, o_stride, mode;
    float eps, scale;
} p;
shared float partial[32];

void main() {
    const uint lane = gl_LocalInvocationID.x;
    const uint subgroups = (gl_WorkGroupSize.x + gl_SubgroupSize - 1) / gl_SubgroupSize;
    for (uint g = gl_WorkGroupID.x; g < p.segments; g += gl_NumWorkGroups.x) {
        const uint xb = p.x_off + g * p.x_stride, ob = p.o_off + g * p.o_stride;
        float acc = 0.0;
        if ((p.mode & 2u) != 0u) {
            // Each lane adds the elements it reads below, so no other lane reads them first.
            for (uint i = lane; i < p.n; i += gl_WorkGroupSize.x) x[xb + i] += a[xb + i];
        }
        for (uint i = lane; i < p.n; i += gl_WorkGroupSize.x) acc += x[xb + i] * x[xb + i];
        acc = subgroupAdd(acc);
        if (gl_SubgroupInvocationID == 0) partial[gl_SubgroupID] = acc;
        barrier();
        float total = 0.0;
        for (uint s = 0; s < subgroups; ++s) total += partial[s];
        const float inv = 1.0 / sqrt(total / float(p.n) + p.eps);
        barrier();  // every lane has read partial[] before the next segment writes it
        for (uint i = lane; i < p.n; i += gl_WorkGroupSize.x) {
            float v = x[xb + i] * inv * weight[i];
            if ((p.mode & 1u) != 0u) v *= p.scale;
            o[ob + i] = v;
        }
    }
}
