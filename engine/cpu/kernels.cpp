#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/kernels.h"

#include "engine/cpu/bf16_matmul.h"
#include "engine/cpu/int_kernels.h"
#if defined(__x86_64__)
#include "engine/cpu/x86/f32_kernels.h"
#elif defined(__aarch64__)
#include "engine/cpu/arm64/features.h"
#endif

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace inkling::cpu {
namespace {

using model::DType;
using model::Matrix;

// ---- generic -------------------------------------------------------------------------
constexpr std::int64_t kDotLanes = 64;  // dot()'s sums (kernels.h)

// dot()'s one order (kernels.h), as the reference states it: 64 sums, element i into sum
// i mod 64 through a fused multiply-add, the elements past n as +0, then halves added.
float dot_scalar(const float* a, const float* b, std::int64_t n) {
    float acc[kDotLanes] = {};
    for (std::int64_t base = 0; base < n; base += kDotLanes)
        for (std::int64_t j = 0; j < kDotLanes; ++j) {
            const std::int64_t i = base + j;
            acc[j] = i < n ? std::fma(a[i], b[i], acc[j]) : std::fma(0.0f, 0.0f, acc[j]);
        }
    for (std::int64_t h = kDotLanes / 2; h >= 1; h /= 2)
        for (std::int64_t j = 0; j < h; ++j) acc[j] = acc[j] + acc[j + h];
    return acc[0];
}

void row_scalar(const Matrix& m, std::int64_t r, float* out) { model::row_to_f32(m, r, out); }

void axpy_scalar(float a, const float* x, std::int64_t n, float* y) {
    for (std::int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void dots_scalar(const float* a, const float* b, std::int64_t stride, std::int64_t rows, std::int64_t n, float* out) {
    for (std::int64_t r = 0; r < rows; ++r) out[r] = dot_scalar(a, b + r * stride, n);
}

void axpys_scalar(const float* a, const float* x, std::int64_t stride, std::int64_t rows, std::int64_t n, float* y) {
    for (std::int64_t r = 0; r < rows; ++r) axpy_scalar(a[r], x + r * stride, n, y);
}

struct Kernels {
    float (*dot)(const float*, const float*, std::int64_t);
    void (*row)(const Matrix&, std::int64_t, float*);
    void (*dots)(const float*, const float*, std::int64_t, std::int64_t, std::int64_t, float*);
    void (*axpys)(const float*, const float*, std::int64_t, std::int64_t, std::int64_t, float*);
    // Optional: one row · four vectors; must be bitwise equal to four dot() calls.
    void (*dot4)(const float*, const float* const*, std::int64_t, float*) = nullptr;
};

// The generic kernels, or x86's (x86/f32_kernels.h). (ARM64: the f32 products keep the
// scalar dot; the bf16 and integer ones have NEON kernels.)
Kernels kernels_for(Isa isa) {
#if defined(__x86_64__)
    if (isa == Isa::Avx512)
        return {.dot = x86::dot_avx512,
                .row = x86::row_avx512,
                .dots = x86::dots_avx512,
                .axpys = x86::axpys_avx512,
                .dot4 = x86::dot4_avx512};
    if (isa == Isa::Avx2)
        return {.dot = x86::dot_avx2, .row = x86::row_avx2, .dots = x86::dots_avx2, .axpys = x86::axpys_avx2};
#endif
    (void)isa;
    return {.dot = dot_scalar, .row = row_scalar, .dots = dots_scalar, .axpys = axpys_scalar};
}

Isa g_isa = best_isa();
Kernels g_kernels = kernels_for(g_isa);
Numerics g_numerics = Numerics::Exact;

}  // namespace

Isa best_isa() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
    return Isa::Scalar;
#elif defined(__aarch64__)
    return arm64::best_isa();
#else
    return Isa::Scalar;
#endif
}

std::vector<Isa> isas() {
#if defined(__x86_64__)
    return {Isa::Scalar, Isa::Avx2, Isa::Avx512};
#elif defined(__aarch64__)
    return {Isa::Scalar, Isa::Neon, Isa::Dotprod, Isa::I8mm};
#else
    return {Isa::Scalar};
#endif
}

// Each architecture's levels are in order within the enum, so "at most the best" is enough
// once the ISA is one of this architecture's.
bool isa_supported(Isa isa) {
    const std::vector<Isa> own = isas();
    return std::find(own.begin(), own.end(), isa) != own.end() && static_cast<int>(isa) <= static_cast<int>(best_isa());
}

Isa active_isa() { return g_isa; }

void set_isa(Isa isa) {
    if (!isa_supported(isa)) throw std::runtime_error(std::string("this CPU does not support ") + isa_name(isa));
    g_isa = isa;
    g_kernels = kernels_for(isa);
}

const char* isa_name(Isa isa) {
    switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Neon: return "neon";
    case Isa::Dotprod: return "dotprod";
    case Isa::I8mm: return "i8mm";
    case Isa::Scalar: break;
    }
    return "scalar";
}

Isa parse_isa(const std::string& name) {
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon, Isa::Dotprod, Isa::I8mm})
        if (name == isa_name(isa)) return isa;
    throw std::runtime_error("unknown ISA '" + name + "' (scalar, avx2 or avx512 on x86-64; scalar, neon, dotprod or "
                             "i8mm on ARM64)");
}

KernelNames active_kernels() {
    const char* integer = int_kernel_name(g_isa);
    return {bf16_kernel_name(g_isa, g_numerics), integer, integer};
}

Numerics active_numerics() { return g_numerics; }

void set_numerics(Numerics numerics) { g_numerics = numerics; }

const char* numerics_name(Numerics numerics) { return numerics == Numerics::Bf16 ? "bf16" : "exact"; }

Numerics parse_numerics(const std::string& name) {
    if (name == "exact") return Numerics::Exact;
    if (name == "bf16") return Numerics::Bf16;
    throw std::runtime_error("unknown numerics '" + name + "' (exact or bf16)");
}

float dot(const float* a, const float* b, std::int64_t n) { return g_kernels.dot(a, b, n); }

void dots(const float* a, const float* b, std::int64_t stride, std::int64_t rows, std::int64_t n, float* out) {
    g_kernels.dots(a, b, stride, rows, n, out);
}

void axpys(const float* a, const float* x, std::int64_t stride, std::int64_t rows, std::int64_t n, float* y) {
    g_kernels.axpys(a, x, stride, rows, n, y);
}

void row_f32(const Matrix& m, std::int64_t r, float* out) { g_kernels.row(m, r, out); }

namespace {

// Output rows [begin, end) of one product; `xi`: the job's activations quantized, for
// integer weights; `xb`: packed for bf16 weights.
void product_rows(const MatJob& j, std::int64_t begin, std::int64_t end, const Kernels& k,
                  const IntActivations* xi, const Bf16Activations* xb) {
    const Matrix& w = *j.w;
    if (xi) return int_product_rows(g_isa, w, *xi, begin, end, j.y);
    if (xb) return bf16_product_rows(g_isa, w, *xb, begin, end, j.y);
    const std::int64_t out = w.rows, in = w.cols;
    std::vector<float>& buf = thread_scratch<float, struct buf_scratch>();
    if (buf.size() < static_cast<std::size_t>(in)) buf.resize(static_cast<std::size_t>(in));
    for (std::int64_t o = begin; o < end; ++o) {
        const float* row = reinterpret_cast<const float*>(w.row(o));
        // safetensors does not promise 4-byte alignment: copy an unaligned f32 row.
        if (w.dtype != DType::F32 || reinterpret_cast<std::uintptr_t>(row) % alignof(float) != 0) {
            k.row(w, o, buf.data());
            row = buf.data();
        }
        std::int64_t s = 0;
        if (k.dot4)
            for (; s + 4 <= j.rows_x; s += 4) {
                const float* xs[4] = {j.x + s * in, j.x + (s + 1) * in, j.x + (s + 2) * in, j.x + (s + 3) * in};
                float r4[4];
                k.dot4(row, xs, in, r4);
                for (int t = 0; t < 4; ++t) j.y[(s + t) * out + o] = r4[t];
            }
        for (; s < j.rows_x; ++s) j.y[s * out + o] = k.dot(row, j.x + s * in, in);
    }
}

}  // namespace

void matmul(const float* x, std::int64_t rows_x, const Matrix& w, float* y, ThreadPool& pool,
            std::optional<std::span<const Matrix* const>> next) {
    const MatJob job{x, rows_x, &w, y};
    matmul_group(std::span(&job, 1), pool, next);
}

namespace {

// Weight units (64 bytes) a row of `w` counts as when threads share products by bytes.
std::int64_t row_units(const Matrix& w) {
    return w.rows > 0 ? std::max<std::int64_t>(1, static_cast<std::int64_t>(w.bytes()) / w.rows / 64) : 1;
}

// Multiply-adds a core does, by weight kind, in the time 64 bytes of weights arrive from
// memory: `inkling bench --kernels` at n = 64 on AMD Zen 4 (2 threads: bf16 exact ~205
// GFLOP/s, vdpbf16ps ~350, int8 ~330, int4 ~400) against ~25 GB/s a core.
std::int64_t macs_per_unit(DType dtype) {
    switch (dtype) {
        case DType::BF16: return g_numerics == Numerics::Bf16 && bf16_dot_product_active() ? 224 : 128;
        case DType::I8: return 224;
        case DType::Q4: return 256;
        default: return 64;
    }
}

// What a row of `w` against `rows_x` activation rows costs in those units: its bytes while
// memory bounds it (decode), its arithmetic once that takes longer (prefill, batched decode).
// A prompt chunk's MoE group mixes routed experts of a few dozen rows with shared ones of
// all the chunk's rows: shared by bytes alone, the thread holding the shared experts had
// most of the arithmetic while the other waited (Inkling-Small's width, a 512-token prompt:
// the engine's thread idle half of every MoE layer's expert time).
std::int64_t row_cost(const Matrix& w, std::int64_t rows_x) {
    return std::max(row_units(w), rows_x * w.cols / macs_per_unit(w.dtype));
}

// The rows of a product whose first unit falls in [begin, end), the product's rows taking
// `u` units each from unit `first` of the group: how matmul_group's threads share a group.
std::pair<std::int64_t, std::int64_t> rows_in(std::int64_t begin, std::int64_t end, std::int64_t first,
                                              std::int64_t u, std::int64_t rows) {
    return {std::clamp<std::int64_t>((begin - first + u - 1) / u, 0, rows),
            std::clamp<std::int64_t>((end - first + u - 1) / u, 0, rows)};
}

}  // namespace

std::vector<WarmRange> warm_ranges(std::span<const Matrix* const> next, const ThreadPool& pool) {
    // Each thread's rows, as matmul_group will split them, as byte runs (weights, then
    // their scales).
    std::int64_t total = 0;
    for (const Matrix* w : next) total += w->rows * row_units(*w);
    const unsigned ways = pool.size();
    std::vector<std::vector<WarmRange>> runs(ways);
    for (unsigned t = 0; t < ways; ++t) {
        const auto [begin, end] = pool.share(total, t);
        std::int64_t first = 0;
        for (const Matrix* w : next) {
            const std::int64_t u = row_units(*w);
            const auto [b, e] = rows_in(begin, end, first, u, w->rows);
            first += w->rows * u;
            if (b >= e) continue;
            runs[t].push_back({w->row(b), static_cast<std::size_t>(w->row(e) - w->row(b))});
            if (w->scales)
                runs[t].push_back({reinterpret_cast<const std::byte*>(w->row_scales(b)),
                                   static_cast<std::size_t>((e - b) * w->scale_stride) * sizeof(float)});
        }
    }
    // In turns of kSlice bytes from each thread's runs, until kWarmBytes.
    constexpr std::size_t kSlice = 64 << 10;
    std::vector<WarmRange> out;
    std::vector<std::size_t> run(ways, 0), at(ways, 0);
    std::size_t taken = 0;
    for (bool more = true; more && taken < kWarmBytes;) {
        more = false;
        for (unsigned t = 0; t < ways && taken < kWarmBytes; ++t) {
            std::size_t want = std::min(kSlice, kWarmBytes - taken);
            while (want > 0 && run[t] < runs[t].size()) {
                const WarmRange& r = runs[t][run[t]];
                const std::size_t n = std::min(want, r.bytes - at[t]);
                out.push_back({r.data + at[t], n});
                taken += n, want -= n, at[t] += n;
                if (at[t] == r.bytes) ++run[t], at[t] = 0;
            }
            more = more || run[t] < runs[t].size();
        }
    }
    return out;
}

void matmul_group(std::span<const MatJob> jobs, ThreadPool& pool, std::optional<std::span<const Matrix* const>> next) {
    const Kernels k = g_kernels;
    // The threads share the jobs' output rows by what they cost (row_cost), not by their
    // count: a row of bf16 weights reads twice an int8 row's bytes and four times an int4
    // row's, and a group of int4 routed experts and a bf16 shared one (a converted
    // checkpoint's MoE layer) split by rows left one thread with most of the bytes. Job i's
    // row r spans units[i] units from the job's first unit + r·units[i]; a thread takes the
    // rows whose first unit falls in its share of the total.
    std::vector<std::int64_t>& units = thread_scratch<std::int64_t, struct units_scratch>();
    units.assign(jobs.size(), 1);
    std::int64_t total = 0, work = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const MatJob& j = jobs[i];
        units[i] = row_cost(*j.w, j.rows_x);
        total += j.w->rows * units[i];
        work += j.w->rows * j.w->cols * j.rows_x;
    }
    // Integer weights: each job's activations quantized once, before the threads start;
    // jobs reading the same activations (q/k/v/r, gate/up) share one copy. Kept across
    // calls so a decode step does not allocate.
    std::vector<IntActivations>& quantized = thread_scratch<IntActivations, struct quantized_scratch>();
    std::vector<const IntActivations*>& per_job = thread_scratch<const IntActivations*, struct per_job_scratch>();
    std::vector<std::size_t>& slot = thread_scratch<std::size_t, struct slot_scratch>();
    slot.assign(jobs.size(), SIZE_MAX);
    std::size_t used = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const MatJob& j = jobs[i];
        if (!model::is_quantized(j.w->dtype)) continue;
        for (std::size_t p = 0; p < i && slot[i] == SIZE_MAX; ++p)
            if (slot[p] != SIZE_MAX && jobs[p].x == j.x && jobs[p].rows_x == j.rows_x && jobs[p].w->cols == j.w->cols)
                slot[i] = slot[p];
        if (slot[i] != SIZE_MAX) continue;
        if (quantized.size() <= used) quantized.resize(used + 1);
        // In the int4 order too, so that jobs of either weight kind can share it.
        prepare_int_activations(g_isa, true, j.x, j.rows_x, j.w->cols, quantized[used]);
        slot[i] = used++;
    }
    per_job.assign(jobs.size(), nullptr);
    for (std::size_t i = 0; i < jobs.size(); ++i)
        if (slot[i] != SIZE_MAX) per_job[i] = &quantized[slot[i]];
    // bf16 weights: each job's activations packed once the same way (shared likewise).
    std::vector<Bf16Activations>& packed = thread_scratch<Bf16Activations, struct packed_scratch>();
    std::vector<const Bf16Activations*>& per_job_bf16 = thread_scratch<const Bf16Activations*, struct per_job_bf16_scratch>();
    std::vector<std::size_t>& slot_bf16 = thread_scratch<std::size_t, struct slot_bf16_scratch>();
    slot_bf16.assign(jobs.size(), SIZE_MAX);
    std::size_t packed_used = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const MatJob& j = jobs[i];
        if (j.w->dtype != DType::BF16) continue;
        for (std::size_t p = 0; p < i && slot_bf16[i] == SIZE_MAX; ++p)
            if (slot_bf16[p] != SIZE_MAX && jobs[p].x == j.x && jobs[p].rows_x == j.rows_x &&
                jobs[p].w->cols == j.w->cols)
                slot_bf16[i] = slot_bf16[p];
        if (slot_bf16[i] != SIZE_MAX) continue;
        if (packed.size() <= packed_used) packed.resize(packed_used + 1);
        prepare_bf16_activations(g_isa, g_numerics, j.x, j.rows_x, j.w->cols, packed[packed_used]);
        slot_bf16[i] = packed_used++;
    }
    per_job_bf16.assign(jobs.size(), nullptr);
    for (std::size_t i = 0; i < jobs.size(); ++i)
        if (slot_bf16[i] != SIZE_MAX) per_job_bf16[i] = &packed[slot_bf16[i]];
    // (The workers must read the caller's tables, not their own thread_local ones.)
    const IntActivations* const* xi = per_job.data();
    const Bf16Activations* const* xb = per_job_bf16.data();
    const std::int64_t* per_row = units.data();
    // The rows whose first unit is in [begin, end), of every job.
    auto body = [&](std::int64_t begin, std::int64_t end) {
        std::int64_t first = 0;
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            const MatJob& j = jobs[i];
            const std::int64_t u = per_row[i], last = first + j.w->rows * u;
            const auto [b, e] = rows_in(begin, end, first, u, j.w->rows);
            if (b < e) product_rows(j, b, e, k, xi[i], xb[i]);
            first = last;
            if (first >= end) break;
        }
    };
    std::optional<std::span<const WarmRange>> warm;
    std::vector<WarmRange>& warm_list = thread_scratch<WarmRange, struct warm_scratch>();
    if (next) {
        warm_list = warm_ranges(*next, pool);
        warm = std::span<const WarmRange>(warm_list);
    }
    // Small products are not worth waking the workers, unless they carry a new warm list:
    // the old one may name weights the caller is about to release (a round's experts).
    if (work < (1 << 15) && !next) body(0, total);
    else pool.parallel_for(total, body, warm);
}

void rmsnorm(const float* x, const float* weight, double eps, std::int64_t n, float* out) {
    double ss = 0.0;
    for (std::int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    float r = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + static_cast<float>(eps));
    for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * r * weight[i];
}

void rmsnorm_rows(const float* x, const float* weight, double eps, std::int64_t n, std::int64_t rows, float* out,
                  ThreadPool& pool) {
    auto body = [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) rmsnorm(x + r * n, weight, eps, n, out + r * n);
    };
    // A row of 1,024 takes ~1 µs (its sum a chain of dependent additions), a hand-off to the
    // workers about as long.
    if (rows * n >= (1 << 14) && pool.size() > 1) pool.parallel_for(rows, body);
    else body(0, rows);
}

}  // namespace inkling::cpu
