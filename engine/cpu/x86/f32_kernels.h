// The x86 versions of engine/cpu/kernels.cpp's f32 kernels (each compiled for its ISA with
// __attribute__((target))); engine/cpu/kernels.cpp holds the generic ones and picks.
#pragma once

#include <cstdint>

#include "engine/model/tensor.h"

namespace inkling::cpu::x86 {

// AVX2 + FMA (+ F16C for row_avx2's f16 rows).
float dot_avx2(const float* a, const float* b, std::int64_t n);
void dots_avx2(const float* a, const float* b, std::int64_t stride, std::int64_t rows, std::int64_t n, float* out);
void axpys_avx2(const float* a, const float* x, std::int64_t stride, std::int64_t rows, std::int64_t n, float* y);
void row_avx2(const model::Matrix& m, std::int64_t r, float* out);

// AVX-512 F.
float dot_avx512(const float* a, const float* b, std::int64_t n);
void dots_avx512(const float* a, const float* b, std::int64_t stride, std::int64_t rows, std::int64_t n, float* out);
void axpys_avx512(const float* a, const float* x, std::int64_t stride, std::int64_t rows, std::int64_t n, float* y);
// One row a against four vectors b[0..3]: bitwise equal to four dot_avx512 calls.
void dot4_avx512(const float* a, const float* const* b, std::int64_t n, float* out);
void row_avx512(const model::Matrix& m, std::int64_t r, float* out);

}  // namespace inkling::cpu::x86
