// The CPU backend of the forward (backend.h): every block on the host, in place on the
// forward's residual rows, with the kernels of engine/cpu on the forward's thread pool.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/forward/backend.h"
#include "engine/forward/meter.h"
#include "engine/model/weights.h"

namespace inkling::forward {

class CpuBackend final : public Backend {
public:
    CpuBackend(const model::Model& model, Meter& meter);

    void begin(std::span<const Span> spans, std::int64_t rows, float* x) override;
    void attention(int layer) override;
    void dense_mlp(int layer) override;
    void router(int layer, float* h, float* logits) override;
    void moe(int layer, const Routing& routing, const float* h, HostExperts& host) override;
    bool has_head() const override { return true; }
    void head(const std::vector<std::int64_t>& out_rows, float* logits) override;
    void hand_off(float*) override {}  // x is the forward's own buffer

private:
    // a (the block's output) through the layer's conv `which` (2: attention, 3: MLP) per
    // session, then x += a.
    void conv_add(int layer, int which, const std::vector<float>& conv_w);
    // `then`: what the step reads after the down projection (Meter's `next`).
    void ffn(const model::Ffn& f, std::int64_t rows, const float* x, float* out,
             std::span<const model::Matrix* const> then);
    // The weights of the first products after layer `layer`'s attention, and after the
    // whole layer (the next layer's q/k/v/r, or lm_head after the last; layer −1: the
    // next step's first), which the pool warms once the products before them are done.
    std::vector<const model::Matrix*> after_attention(int layer) const;
    std::vector<const model::Matrix*> after_layer(int layer) const;

    const model::Config& c_;
    const model::Weights& w_;
    Meter& meter_;
    std::vector<Span> spans_;
    std::int64_t rows_ = 0;
    float* x_ = nullptr;
    // Buffers kept across steps and layers (cpu::at_least): h_ the normed rows, a_ a block's
    // output; the attention's projections and context; an FFN's gate/up (or the head's rows).
    std::vector<float> h_, a_, q_, k_, v_, r_, ctx_, gu_;
};

}  // namespace inkling::forward
