// The forward's pointwise functions in the device's shaders, step for step as the CPU takes
// them (engine/cpu/exp_core.h, engine/cpu/activations.cpp): e^x through Cephes' polynomial,
// the sigmoid's 1 / (1 + e) by Newton's iteration, SiLU and SwiGLU. Only additions,
// multiplications, comparisons and bit moves, each declared `precise` so that no compiler
// fuses them: Vulkan rounds every f32 addition and multiplication correctly, so these give
// the CPU's bits on every device — unlike the built-in exp() and `/`, whose error bounds a
// driver chooses (the SwiGLU rows a converted model quantizes to int8 must be the CPU's:
// one moved bit can move a rounding step, docs/vulkan.md "Quantized experts").
//
// The constants are the bits the CPU's float literals round to, written as bits so that no
// compiler's decimal parsing can differ.

// e^x for x ≤ 0 (0 below −87, for −inf and NaN): 2^n · e^r with n = round(x / ln 2) found
// by adding 1.5 · 2^23, r = x − n ln 2 (ln 2 in two parts), e^r by a degree-6 polynomial.
float exp_nonpositive(float x) {
    const float log2e = uintBitsToFloat(0x3fb8aa3bu);
    const float ln2_hi = uintBitsToFloat(0x3f318000u), ln2_lo = uintBitsToFloat(0xb95e8083u);
    const float round_add = uintBitsToFloat(0x4b400000u);  // 1.5 · 2^23
    precise float shifted = x * log2e + round_add;
    precise float n = shifted - round_add;
    precise float r = x - n * ln2_hi;
    r = r - n * ln2_lo;
    precise float p = uintBitsToFloat(0x39506967u);
    p = p * r + uintBitsToFloat(0x3ab743ceu);
    p = p * r + uintBitsToFloat(0x3c088908u);
    p = p * r + uintBitsToFloat(0x3d2aa9c1u);
    p = p * r + uintBitsToFloat(0x3e2aaaaau);
    p = p * r + 0.5;
    p = p * (r * r) + r + 1.0;
    const float scale = uintBitsToFloat((floatBitsToUint(shifted) - 0x4b400000u + 127u) << 23);
    precise float e = p * scale;
    return x >= -87.0 ? e : 0.0;  // false for NaN too
}

// 1 / d for d in [1, 2]: the line 24/17 − 8/17 · d (within 1/17), then three Newton steps
// y += y · (1 − d·y); within 1.15 ulp of the quotient over every float of [1, 2].
float reciprocal_1_to_2(float d) {
    precise float y = uintBitsToFloat(0x3fb4b4b5u) - uintBitsToFloat(0x3ef0f0f1u) * d;
    for (int k = 0; k < 3; ++k) {
        precise float t = 1.0 - d * y;
        y = y + y * t;
    }
    return y;
}

// 1 / x for a positive normal x whose reciprocal is normal too: x's significand m in [1, 2)
// through reciprocal_1_to_2, then 2^−exponent, an exact scaling.
float reciprocal_positive(float x) {
    const uint bits = floatBitsToUint(x);
    const float m = uintBitsToFloat((bits & 0x007fffffu) | 0x3f800000u);
    const float scale = uintBitsToFloat((254u - (bits >> 23)) << 23);
    precise float r = reciprocal_1_to_2(m) * scale;
    return r;
}

// 1 / (1 + e^−v), as e / (1 + e) with e = e^−|v| for v < 0; NaN stays NaN.
float sigmoid_of(float v) {
    const float e = exp_nonpositive(-abs(v));
    precise float d = 1.0 + e;
    const float y = reciprocal_1_to_2(d);
    precise float s = v >= 0.0 ? y : e * y;
    return v == v ? s : v;
}

// silu(g) · u, multiplied in that order.
float swiglu_of(float g, float u) {
    precise float r = g * sigmoid_of(g) * u;
    return r;
}

vec4 swiglu_of4(vec4 g, vec4 u) {
    return vec4(swiglu_of(g.x, u.x), swiglu_of(g.y, u.y), swiglu_of(g.z, u.z), swiglu_of(g.w, u.w));
}
