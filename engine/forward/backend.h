// The backend interface of the forward: the blocks of one Inkling layer, which the CPU
// (cpu_backend.h) and the Vulkan chain (vulkan/chain.h) implement. The layer sequence is
// written once, in Forward::run_layers (forward.cpp):
//
//   be.begin(spans, rows, x)
//   for each layer i the backend takes:
//       be.attention(i)                              x += conv(o(attn(norm(x))))
//       dense:  be.dense_mlp(i)                      x += conv(mlp(norm(x)))
//       MoE:    be.moe_resident(i)                   the whole block on the backend, or:
//               be.router(i, h, logits)              h = norm(x), logits = router(h)
//               routing = experts.route(i, logits)   (top-k on the host)
//               be.moe(i, routing, h, experts)       x += conv(routed + shared)
//   be.head(out_rows, logits)   or   be.hand_off(x) when later layers run elsewhere
//
// A backend may record blocks into one device frame and submit at its sync points (the
// chain runs a frame at router() and dense_mlp(), and overlaps its shared experts with the
// host's routed ones inside moe()). What the host's session states hold is canonical: a
// backend that keeps mirrors writes the states back only in head()/hand_off(), so a step
// that throws (vulkan::DeviceLost, vulkan::OutOfBudget) leaves them as they were and the
// forward can rerun it elsewhere from the same embedded rows.
//
// Adding an op: one call here (or a change inside a block), its CPU implementation in
// cpu_backend.cpp, its shader and recording call in vulkan/ops.h, and a parity case in
// tests/vulkan/backend_ops_test.cpp (docs/engine.md, "Backends").
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/forward/session_state.h"

namespace inkling::forward {

class HostExperts;

// A block's rows within a batched step: batch rows [first, first+rows) at positions
// pos0, pos0+1, … of `state`.
struct Span {
    SessionState* state;
    std::int64_t first, rows, pos0;
};

// One MoE layer's routing for every row of a step: which rows each expert serves with
// which combine weight, the experts used (increasing id), the shared experts' weights.
struct Routing {
    std::vector<std::vector<std::pair<std::int64_t, float>>> by_expert;  // [expert] → (row, weight)
    std::vector<int> used;
    std::vector<float> shared_w;  // [rows][shared_experts]
};

class Backend {
public:
    virtual ~Backend() = default;

    // A step over `rows` rows of `spans`; x [rows][hidden] holds the embedded rows (the
    // CPU works on it in place; a device uploads it).
    virtual void begin(std::span<const Span> spans, std::int64_t rows, float* x) = 0;
    virtual void attention(int layer) = 0;
    virtual void dense_mlp(int layer) = 0;
    // The post-attention norm to h [rows][hidden] and the router's logits [rows][E+NS],
    // both on the host.
    virtual void router(int layer, float* h, float* logits) = 0;
    // The routed experts through `host` (over h), the shared experts, their join, the MLP
    // conv and the residual add.
    virtual void moe(int layer, const Routing& routing, const float* h, HostExperts& host) = 0;
    // The whole MoE block, routing included, when this backend holds every routed expert
    // of the layer (the chain's resident mode): x += conv(routed + shared) with no host
    // round trip. False: the host routes (router() then moe()).
    virtual bool moe_resident(int /*layer*/) { return false; }
    // Whether head() is available (a partial device chain leaves lm_head to the CPU).
    virtual bool has_head() const = 0;
    // Ends the step: final norm ÷ mup and lm_head of `out_rows` into logits [n][vocab].
    virtual void head(const std::vector<std::int64_t>& out_rows, float* logits) = 0;
    // Ends a step whose later layers run on another backend: the residual rows into x.
    virtual void hand_off(float* x) = 0;
};

}  // namespace inkling::forward
