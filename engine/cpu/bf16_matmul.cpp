// The generic (scalar) bf16 product — the reference every SIMD version reproduces bit for
// bit — and the choice of version per ISA.
#include "engine/cpu/bf16_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__)
#include "engine/cpu/x86/bf16_matmul.h"
#elif defined(__aarch64__)
#include "engine/cpu/arm64/bf16_matmul.h"
#endif
#include "engine/cpu/thread_scratch.h"

namespace inkling::cpu {
namespace {

using model::DType;
using model::Matrix;

constexpr std::int64_t kChunk = 32;

float f32_of_bf16(std::uint16_t h) { return model::bf16_to_f32(h); }

// Weight element i of a bf16 row of `cols`, +0 past the end.
float weight_at(const std::uint16_t* w, std::int64_t cols, std::int64_t i) {
    return i < cols ? f32_of_bf16(w[i]) : 0.0f;
}

float finish16(float* acc) {
    for (int h = 8; h > 0; h /= 2)
        for (int i = 0; i < h; ++i) acc[i] = acc[i] + acc[i + h];
    return acc[0];
}

// One element: weight row `w` against the packed activation row `a` (the f32 layout).
float dot_scalar(const std::uint16_t* w, std::int64_t cols, const float* a, std::int64_t chunks) {
    float acc[16] = {};
    for (std::int64_t c = 0; c < chunks; ++c) {
        const float* odd = a + c * kChunk;
        const float* even = odd + 16;
        for (int j = 0; j < 16; ++j) {
            const std::int64_t i = c * kChunk + 2 * j;
            acc[j] = std::fma(weight_at(w, cols, i + 1), odd[j], acc[j]);
            acc[j] = std::fma(weight_at(w, cols, i), even[j], acc[j]);
        }
    }
    return finish16(acc);
}

void rows_scalar(const Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end, float* y) {
    for (std::int64_t o = begin; o < end; ++o) {
        const auto* row = reinterpret_cast<const std::uint16_t*>(w.row(o));
        for (std::int64_t s = 0; s < x.rows; ++s)
            y[s * w.rows + o] = dot_scalar(row, w.cols, x.f32.data() + s * x.stride, x.chunks);
    }
}

// The f32 layout (the bf16 one is packed only where vdpbf16ps runs, by pack_avx512).
void pack_scalar(bool round, const float* x, Bf16Activations& out) {
    for (std::int64_t s = 0; s < out.rows; ++s) {
        const float* src = x + s * out.cols;
        for (std::int64_t i = 0; i < out.cols; ++i) {
            const float v = round ? f32_of_bf16(round_to_bf16(src[i])) : src[i];
            const std::int64_t c = i / kChunk, j = i % kChunk;
            // Odd columns first, then even ones (see Bf16Activations).
            const std::int64_t at = c * kChunk + (j % 2 ? j / 2 : 16 + j / 2);
            out.f32[static_cast<std::size_t>(s * out.stride + at)] = v;
        }
    }
}

bool is_amd() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
#else
    return false;
#endif
}

bool g_dot_product = has_avx512_bf16() && is_amd();
bool g_decode_interleave = is_amd();

}  // namespace

std::uint16_t round_to_bf16(float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    if ((b & 0x7f800000u) == 0) return static_cast<std::uint16_t>((b >> 16) & 0x8000u);      // ±0, subnormals
    if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((b >> 16) | 0x40);  // NaN, quiet
    return static_cast<std::uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

bool has_avx512_bf16() {
#if !defined(__x86_64__)
    return false;
#else
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bf16");
#endif
}

bool bf16_dot_product_active() { return g_dot_product; }

void set_bf16_dot_product(bool on) {
    if (on && !has_avx512_bf16()) throw std::runtime_error("this CPU has no AVX-512 BF16 dot product");
    g_dot_product = on;
}

bool bf16_decode_interleave_active() { return g_decode_interleave; }

void set_bf16_decode_interleave(bool on) { g_decode_interleave = on; }

namespace {

// The tiled AVX-512 kernels need BW/DQ on top of F (word masks, 256-bit extracts).
bool has_avx512_tiles() {
#if !defined(__x86_64__)
    return false;
#else
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
}

enum class Version { Scalar, Avx2, Avx512, Avx512Dot, Neon };

Version version_for(Isa isa, Numerics numerics) {
    // Every ARM64 level has the same bf16 kernel: NEON FMA. (BFDOT and BFMMLA do not round
    // as the fixed pattern does: they would not give the scalar reference's bits.)
    if (isa == Isa::Neon || isa == Isa::Dotprod || isa == Isa::I8mm) return Version::Neon;
    if (isa == Isa::Avx512 && has_avx512_tiles())
        return numerics == Numerics::Bf16 && g_dot_product ? Version::Avx512Dot : Version::Avx512;
    if (isa == Isa::Avx2 || isa == Isa::Avx512) return Version::Avx2;
    return Version::Scalar;
}

}  // namespace

void prepare_bf16_activations(Isa isa, Numerics numerics, const float* x, std::int64_t rows, std::int64_t cols,
                              Bf16Activations& out) {
    const Version v = version_for(isa, numerics);
    out.rows = rows;
    out.cols = cols;
    out.chunks = (cols + kChunk - 1) / kChunk;
    out.stride = out.chunks * kChunk + kChunk;
    out.dot = v == Version::Avx512Dot;
    const auto size = static_cast<std::size_t>(rows * out.stride);
    // Columns past the last must read as +0. AVX-512's packer writes every chunk whole (zeros
    // there); the scalar one writes real columns only, so each row's last chunk is cleared
    // first. The gap past a row's chunks is never read. (Clearing the whole buffer on every
    // call wrote a prompt chunk's activations twice.)
    if (out.dot) at_least(out.bf16, size);
    else at_least(out.f32, size);
    const bool round = numerics == Numerics::Bf16;
#if defined(__x86_64__)
    if (v == Version::Avx512 || v == Version::Avx512Dot) return x86::pack_avx512(round, x, out);
#endif
    for (std::int64_t s = 0; s < rows; ++s) {
        float* last = out.f32.data() + s * out.stride + (out.chunks - 1) * kChunk;
        std::fill(last, last + kChunk, 0.0f);
    }
    pack_scalar(round, x, out);
}

void bf16_product_rows(Isa isa, const Matrix& w, const Bf16Activations& x, std::int64_t begin, std::int64_t end,
                       float* y) {
    if (w.dtype != DType::BF16 || x.cols != w.cols)
        throw std::runtime_error(std::string("bf16_product_rows: a ") + model::dtype_name(w.dtype) + " matrix of " +
                                 std::to_string(w.cols) + " columns for activations of " + std::to_string(x.cols));
#if defined(__x86_64__)
    if (x.dot) return x86::bf16_rows_avx512_dot(w, x, begin, end, y);
    switch (version_for(isa, Numerics::Exact)) {
    case Version::Avx512:
    case Version::Avx512Dot: return x86::bf16_rows_avx512(w, x, begin, end, y);
    case Version::Avx2: return x86::bf16_rows_avx2(w, x, begin, end, y);
    case Version::Neon:
    case Version::Scalar: break;
    }
#elif defined(__aarch64__)
    if (version_for(isa, Numerics::Exact) == Version::Neon) return arm64::bf16_rows_neon(w, x, begin, end, y);
#endif
    rows_scalar(w, x, begin, end, y);
}

const char* bf16_kernel_name(Isa isa, Numerics numerics) {
    switch (version_for(isa, numerics)) {
    case Version::Avx512Dot: return "avx512-bf16dot";
    case Version::Avx512: return "avx512";
    case Version::Avx2: return "avx2";
    case Version::Neon: return "neon-fma";
    case Version::Scalar: break;
    }
    return "scalar";
}

}  // namespace inkling::cpu
