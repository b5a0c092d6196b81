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
const uint B = 8u;  // loads in flight a lane

void main() {
    const uint lane = gl_LocalInvocationID.x;
    const uint subgroups = (gl_WorkGroupSize.x + gl_SubgroupSize - 1) / gl_SubgroupSize;
    for (uint g = gl_WorkGroupID.x; g < p.segments; g += gl_NumWorkGroups.x) {
        const uint xb = p.x_off + g * p.x_stride, ob = p.o_off + g * p.o_stride;
        // A lane's elements lane, lane + 128, … in batches of B loads in flight before they
        // are used (one workgroup walking a row of 4096 one load at a time waited ~10 µs);
        // the squares are added in the same order, a padded element adding +0 (no change).
        float acc = 0.0;
        for (uint base = 0; base < p.n; base += 128u * B) {
            float v[B];
            for (uint k = 0; k < B; ++k) {
                const uint i = base + lane + 128u * k;
                v[k] = i < p.n ? x[xb + i] : 0.0;
            }
            if ((p.mode & 2u) != 0u) {
                // The residual add first; each lane writes back only the elements it reads.
                for (uint k = 0; k < B; ++k) {
                    const uint i = base + lane + 128u * k;
                    if (i < p.n) {
                        v[k] += a[xb + i];
                        x[xb + i] = v[k];
                    }
                }
            }
            for (uint k = 0; k < B; ++k) acc += v[k] * v[k];
        }
        acc = subgroupAdd(acc);
        if (gl_SubgroupInvocationID == 0) partial[gl_SubgroupID] = acc;
        barrier();
        float total = 0.0;
        for (uint s = 0; s < subgroups; ++s) total += partial[s];
        const float inv = 1.0 / sqrt(total / float(p.n) + p.eps);
        barrier();  // every lane has read partial[] before the next segment writes it
        for (uint base = 0; base < p.n; base += 128u * B) {
            float v[B], w[B];
            for (uint k = 0; k < B; ++k) {
                const uint i = base + lane + 128u * k;
                v[k] = i < p.n ? x[xb + i] : 0.0;
                w[k] = i < p.n ? weight[i] : 0.0;
            }
            for (uint k = 0; k < B; ++k) {
                const uint i = base + lane + 128u * k;
                float r = v[k] * inv * w[k];
                if ((p.mode & 1u) != 0u) r *= p.scale;
                if (i < p.n) o[ob + i] = r;
            }
        }
    }
}
