// A span's fresh K or V rows into a session's mirror ring: row s of the span (position
// pos0 + s) lands at ring row (pos0 + s) % mrows for every KV head; rows that a later row of
// the same span would overwrite are skipped, as on the host. One invocation per float.
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Fresh { float fresh[]; };  // [R][KV][hd]
layout(std430, set = 0, binding = 1) writeonly buffer Ring { float ring[]; };   // [KV][mrows][hd]
layout(push_constant) uniform Push { uint first, rows, pos0, KV, hd, mrows; } p;

void main() {
    const uint kept = min(p.rows, p.mrows);  // the span's last `kept` rows
    const uint n = kept * p.KV * p.hd;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        const uint d = i % p.hd, g = (i / p.hd) % p.KV, s = p.rows - kept + i / (p.hd * p.KV);
        const uint row = (p.pos0 + s) % p.mrows;
        ring[(g * p.mrows + row) * p.hd + d] = fresh[((p.first + s) * p.KV + g) * p.hd + d];
    }
}
