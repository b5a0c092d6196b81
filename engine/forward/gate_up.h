// An FFN's gate and up products as matmul jobs, and silu(gate) ⊙ up from them: one job over
// the interleaved tensor where the checkpoint has one (model::Ffn::gate_up), else one job
// per view. The same bits either way: every element is the same dot product.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/model/weights.h"

namespace inkling::forward {

// Floats add_gate_up_jobs writes for `rows` rows: rows·2I.
std::int64_t gate_up_floats(const model::Ffn& f, std::int64_t rows);

// Appends the jobs that fill `buf` (gate_up_floats of them) to `jobs`.
void add_gate_up_jobs(const model::Ffn& f, const float* x, std::int64_t rows, float* buf,
                      std::vector<cpu::MatJob>& jobs);

// The matrices add_gate_up_jobs reads, in its jobs' order, appended to `out`.
void add_gate_up_weights(const model::Ffn& f, std::vector<const model::Matrix*>& out);

// silu(gate)·up of each row, from `buf` as add_gate_up_jobs laid it out, into its first
// rows·I floats ([rows][I], the down projection's input).
void swiglu_in_place(const model::Ffn& f, std::int64_t rows, float* buf);

}  // namespace inkling::forward
