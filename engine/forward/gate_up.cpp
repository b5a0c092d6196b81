#include "engine/forward/gate_up.h"

#include "engine/cpu/activations.h"

namespace inkling::forward {

std::int64_t gate_up_floats(const model::Ffn& f, std::int64_t rows) { return rows * 2 * f.gate.rows; }

void add_gate_up_jobs(const model::Ffn& f, const float* x, std::int64_t rows, float* buf,
                      std::vector<cpu::MatJob>& jobs) {
    const std::int64_t I = f.gate.rows;
    if (f.gate_up.data) {
        jobs.push_back({x, rows, &f.gate_up, buf});  // [rows][g0 u0 g1 u1 …]
        return;
    }
    jobs.push_back({x, rows, &f.gate, buf});  // [rows][I] gates, then [rows][I] ups
    jobs.push_back({x, rows, &f.up, buf + rows * I});
}

void add_gate_up_weights(const model::Ffn& f, std::vector<const model::Matrix*>& out) {
    if (f.gate_up.data) {
        out.push_back(&f.gate_up);
        return;
    }
    out.push_back(&f.gate);
    out.push_back(&f.up);
}

void swiglu_in_place(const model::Ffn& f, std::int64_t rows, float* b) {
    const std::int64_t I = f.gate.rows, n = rows * I;
    // In place: each write lands at or before the reads still to come.
    if (f.gate_up.data) cpu::swiglu(b, b + 1, 2, n, b);
    else cpu::swiglu(b, b + n, 1, n, b);
}

}  // namespace inkling::forward
