// The K rows' short conv and per-head RMSNorm in one dispatch, over one session's span:
// sconv.comp's conv (the residual inside, the state advanced) then rmsnorm.comp's norm of each
// head's hd channels — one barrier and one dispatch fewer than the two. One workgroup a
// kv-head, walking the span's rows (a row's norm needs its head's convs, which this
// workgroup's lanes just made); the lanes take channels c, c + 128, … of the head as
// rmsnorm.comp's lanes take a segment's elements, so the partial sums, the subgroupAdd and
// the subgroups' order — and the bits — are the two shaders'.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };             // [rows][channels] at x_off
layout(std430, set = 0, binding = 1) readonly buffer Wc { float wc[]; };  // [channels][kernel]
layout(std430, set = 0, binding = 2) buffer State { float st[]; };        // [channels][kernel − 1] at st_off
layout(std430, set = 0, binding = 3) readonly buffer Wn { float wn[]; };  // [hd]
layout(push_constant) uniform Push {
    uint rows, channels, kernel, x_off, st_off;
    uint hd;
    float eps;
} p;
shared float partial[32];

void main() {
    const uint lane = gl_LocalInvocationID.x, head = gl_WorkGroupID.x;
    const uint subgroups = (gl_WorkGroupSize.x + gl_SubgroupSize - 1) / gl_SubgroupSize;
    const uint taps = p.kernel - 1u;
    float hist[2][8];  // a lane's channels (hd ≤ 256), kernel ≤ 9 (the chain declines more)
    for (uint k = 0; k < 2u; ++k) {
        const uint ch = head * p.hd + lane + 128u * k;
        if (lane + 128u * k < p.hd)
            for (uint j = 0; j < taps; ++j) hist[k][j] = st[p.st_off + ch * taps + j];
    }
    for (uint t = 0; t < p.rows; ++t) {
        const uint xb = p.x_off + t * p.channels + head * p.hd;
        float v[2] = float[2](0.0, 0.0);
        float acc2 = 0.0;
        for (uint k = 0; k < 2u; ++k) {
            const uint c = lane + 128u * k;
            if (c >= p.hd) break;
            const uint ch = head * p.hd + c;
            const float raw = x[xb + c];
            float acc = 0.0;
            for (uint j = 0; j < taps; ++j) acc += wc[ch * p.kernel + j] * hist[k][j];
            acc += wc[ch * p.kernel + taps] * raw;
            for (uint j = 0; j + 1u < taps; ++j) hist[k][j] = hist[k][j + 1u];
            if (taps > 0u) hist[k][taps - 1u] = raw;
            v[k] = raw + acc;
            acc2 += v[k] * v[k];
        }
        acc2 = subgroupAdd(acc2);
        if (gl_SubgroupInvocationID == 0) partial[gl_SubgroupID] = acc2;
        barrier();
        float total = 0.0;
        for (uint s = 0; s < subgroups; ++s) total += partial[s];
        const float inv = 1.0 / sqrt(total / float(p.hd) + p.eps);
        barrier();  // every lane has read partial[] before the next row writes it
        for (uint k = 0; k < 2u; ++k) {
            const uint c = lane + 128u * k;
            if (c < p.hd) x[xb + c] = v[k] * inv * wn[c];
        }
    }
    for (uint k = 0; k < 2u; ++k) {
        const uint ch = head * p.hd + lane + 128u * k;
        if (lane + 128u * k < p.hd)
            for (uint j = 0; j < taps; ++j) st[p.st_off + ch * taps + j] = hist[k][j];
    }
}
