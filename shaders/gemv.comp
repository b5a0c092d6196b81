// y[s][o] = Σ_i x[s][i] · W[o][i] for s < S, o < O: the dense projections. One workgroup
// per output row (grid-stride over rows), its lanes striding over the columns, the row's
// partial sums joined with subgroupAdd and then across subgroups in shared memory.
// FORMAT (specialization constant 0): 0 f32 weights, 1 bf16 weights (two a uint, element
// 2j in the low half). Weights start `w_off` elements into their buffer, rows `stride`
// elements apart (a release checkpoint's gate/up rows are interleaved: stride 2·I).
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint FORMAT = 0;

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint O, I, S;     // output rows, columns, activation rows
    uint stride;      // weight row stride, elements
    uint w_off;       // first weight element
    uint x_off, x_stride;  // first float of x, floats between activation rows
    uint y_off, y_stride;  // first float of y, floats between output rows of y
} p;

shared float partial[32];

float weight(uint e) {
    if (FORMAT == 0) return uintBitsToFloat(w[e]);
    const uint word = w[e >> 1];
    return uintBitsToFloat((e & 1u) == 0u ? word << 16 : word & 0xffff0000u);
}

void main() {
    const uint lane = gl_LocalInvocationID.x;
    const uint subgroups = (gl_WorkGroupSize.x + gl_SubgroupSize - 1) / gl_SubgroupSize;
    for (uint o = gl_WorkGroupID.x; o < p.O; o += gl_NumWorkGroups.x) {
        const uint row = p.w_off + o * p.stride;
        for (uint s = 0; s < p.S; ++s) {
            float acc = 0.0;
            for (uint i = lane; i < p.I; i += gl_WorkGroupSize.x) acc += weight(row + i) * x[p.x_off + s * p.x_stride + i];
            acc = subgroupAdd(acc);
            if (gl_SubgroupInvocationID == 0) partial[gl_SubgroupID] = acc;
            barrier();
            if (lane == 0) {
                float total = 0.0;
                for (uint g = 0; g < subgroups; ++g) total += partial[g];
                y[p.y_off + s * p.y_stride + o] = total;
            }
            barrier();
        }
    }
}
