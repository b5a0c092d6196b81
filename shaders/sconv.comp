// Depthwise causal short conv with the residual inside, over `rows` rows of `channels`
// (one session's span): x[t][c] += Σ_j w[c][j]·col[t+j], col = (state_c, x[·][c]); the
// state keeps the last K−1 raw inputs, oldest first. One thread a channel walks the rows.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, set = 0, binding = 2) buffer State { float st[]; };
layout(push_constant) uniform Push { uint rows, channels, kernel, x_off, st_off; } p;

void main() {
    const uint c = gl_GlobalInvocationID.x;
    if (c >= p.channels) return;
    const uint taps = p.kernel - 1;
    float hist[8];  // kernel ≤ 9 (the chain declines wider convs)
    for (uint j = 0; j < taps; ++j) hist[j] = st[p.st_off + c * taps + j];
    for (uint t = 0; t < p.rows; ++t) {
        const uint at = p.x_off + t * p.channels + c;
        const float raw = x[at];
        float acc = 0.0;
        for (uint j = 0; j < taps; ++j) acc += w[c * p.kernel + j] * hist[j];
        acc += w[c * p.kernel + taps] * raw;
        x[at] = raw + acc;
        for (uint j = 0; j + 1 < taps; ++j) hist[j] = hist[j + 1];
        if (taps > 0) hist[taps - 1] = raw;
    }
    for (uint j = 0; j < taps; ++j) st[p.st_off + c * taps + j] = hist[j];
}
