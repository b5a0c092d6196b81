// CPU kernels: one generic (scalar) version and per-ISA versions of the same operations,
// chosen once at start-up from what the CPU supports (`--isa` overrides for tests).
// Every kernel computes each output element in a fixed order whatever the batch size, so
// one-shot prefill, chunked prefill and token-by-token decode give bitwise equal results.
// Products with bf16 weights: engine/cpu/bf16_matmul.h; with int8/int4: int_kernels.h.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/model/tensor.h"

namespace inkling::cpu {

// x86-64: Scalar < Avx2 < Avx512. ARM64 (engine/cpu/arm64/): Scalar < Neon < Dotprod (SDOT)
// < I8mm (SMMLA), each level also having what the ones below it have.
enum class Isa { Scalar, Avx2, Avx512, Neon, Dotprod, I8mm };

Isa best_isa();          // what this CPU supports
Isa active_isa();        // what the kernels use
void set_isa(Isa isa);   // throws std::runtime_error if the CPU lacks it
bool isa_supported(Isa isa);  // this build has it and this CPU can run it
std::vector<Isa> isas();      // this architecture's ISAs, Scalar first (supported here or not)
const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);  // "scalar", "avx2", "avx512", "neon", "dotprod", "i8mm"

// What the active ISA runs for each weight kind (the engine's start-up banner, `inkling info`):
// e.g. {"avx512", "avx512-vnni", "avx512-vnni"} or {"neon-fma", "smmla+sdot", "smmla+sdot"}.
struct KernelNames {
    const char* bf16;
    const char* int8;
    const char* int4;
};
KernelNames active_kernels();

// What products with bf16 weights do with their f32 activations (process-wide, like the
// ISA; set it before the forward runs, not while it does):
//   Exact (the default): use them as they are — f32 products and sums;
//   Bf16: round them to bf16 first (to nearest even), as transformers' bf16 mode and ggml
//         do; the products are then exact and only the sums round. Needed for the AVX-512
//         BF16 dot product (vdpbf16ps), which doubles the arithmetic rate where it issues
//         at the FMA rate (AMD Zen 4) and halves it where it issues at half (Intel cores
//         to date), so this build uses it only on the former (bf16_matmul.h).
// Both keep one fixed order per output element (engine/cpu/bf16_matmul.h): bitwise the same
// whatever the batch, thread count or ISA. f32 and f16 weights are always exact.
enum class Numerics { Exact, Bf16 };
Numerics active_numerics();
void set_numerics(Numerics numerics);
const char* numerics_name(Numerics numerics);
Numerics parse_numerics(const std::string& name);  // "exact", "bf16"

// Σ a[i]·b[i] in one order on every ISA (the scalar reference, AVX2, AVX-512; ARM64 runs the
// reference), so attention's scores and products with f32 weights are the same bits
// whatever the CPU: sums s_0..s_63 from +0, element i into s_(i mod 64) by a fused
// multiply-add (the elements past n as +0), then s_j += s_(j+h) for h = 32, 16, …, 1.
float dot(const float* a, const float* b, std::int64_t n);
// Attention over a run of cached positions, one call for the run: out[r] =
// dot(a, b + r·stride, n), each bitwise as dot() gives it; and y[i] += a[r]·x_r[i] for r in
// order, x_r = x + r·stride — each product rounded, then the sum (on every x86 ISA the plain
// loop's bits, no FMA), so one call over the rows equals a call a row. x and y do not overlap.
void dots(const float* a, const float* b, std::int64_t stride, std::int64_t rows, std::int64_t n, float* out);
void axpys(const float* a, const float* x, std::int64_t stride, std::int64_t rows, std::int64_t n, float* y);
// One row of `m` as f32.
void row_f32(const model::Matrix& m, std::int64_t r, float* out);

// y[s][o] = Σ_i x[s][i]·W[o][i] for s < rows_x, o < W.rows. x is [rows_x][W.cols].
// `next` as for matmul_group.
void matmul(const float* x, std::int64_t rows_x, const model::Matrix& w, float* y, ThreadPool& pool,
            std::optional<std::span<const model::Matrix* const>> next = std::nullopt);

// Several products in one parallel loop over all their output rows: one hand-off to the
// threads for the lot (a decode step has hundreds of small products). Every element is
// computed exactly as matmul() computes it.
//
// `next`: the weights of the product(s) that will follow (in the order of their jobs), when
// the caller knows them. Once this product is done, the workers pull them into the caches
// while the caller runs the single-threaded work in between (ThreadPool::parallel_for's warm
// list), each thread's future share's first bytes first. Without it the pool keeps the list
// it has (nothing, or what an earlier product named); a product that names one always goes
// through the pool, so that an old list (a round's experts, released after it) is dropped.
struct MatJob {
    const float* x;
    std::int64_t rows_x;
    const model::Matrix* w;
    float* y;
};
void matmul_group(std::span<const MatJob> jobs, ThreadPool& pool,
                  std::optional<std::span<const model::Matrix* const>> next = std::nullopt);

// The warm list for products over `next` (matmul_group's `next`): the bytes each of the
// pool's threads will read, in pieces taken in turn from each thread's share, at most
// kWarmBytes in all (what the caches can hold until the product starts).
constexpr std::size_t kWarmBytes = std::size_t{1} << 20;
std::vector<WarmRange> warm_ranges(std::span<const model::Matrix* const> next, const ThreadPool& pool);

// out = x / sqrt(mean(x²) + eps) ⊙ weight; the mean square accumulates in double.
void rmsnorm(const float* x, const float* weight, double eps, std::int64_t n, float* out);
// The same for `rows` rows of n (row-major; out may be x), shared among the pool's threads
// when there are enough of them (a prompt chunk's; a decode step's stay on the caller).
void rmsnorm_rows(const float* x, const float* weight, double eps, std::int64_t n, std::int64_t rows, float* out,
                  ThreadPool& pool);

}  // namespace inkling::cpu
