// The model's weights bound to their tensors, in one canonical form whatever the
// checkpoint layout: release (`model.llm.*`, fused gate/up rows interleaved) or
// transformers (`model.layers.N.*`). Matrices stay in the mapped files (gate and up of a
// release checkpoint are strided views, not copies); the small f32 tensors (norms, convs,
// bias banks, router bias) are widened once at load.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/safetensors.h"
#include "engine/model/tensor.h"

namespace inkling::experts {
class ExpertStore;
}

namespace inkling::model {

struct Ffn {  // down(silu(gate x) ⊙ up x)
    Matrix gate, up, down;
    // Release checkpoints store gate and up as one tensor of interleaved rows (g0, u0, g1,
    // u1, …): that tensor, or data == nullptr. A product over it reads the rows front to
    // back, where the two strided views each read every other 2-row step: 17 one-row experts
    // streamed at 28.0 GB/s this way against 24.0 through the views (a standalone loop, 2
    // threads of an Intel Xeon VM).
    Matrix gate_up{};
};

struct LayerWeights {
    std::vector<float> attn_norm, mlp_norm;
    Matrix wq, wk, wv, wr, wo;
    std::vector<float> q_norm, k_norm;
    // Short convs, [channels][kernel] each.
    std::vector<float> k_conv, v_conv, attn_conv, mlp_conv;
    std::vector<float> rel_bank;  // [d_rel][extent]
    // Dense layers.
    Ffn dense;
    float dense_scale = 1.0f;
    // MoE layers.
    Matrix router;                 // [experts + shared, D]
    std::vector<float> router_bias;  // [experts], selection only
    float router_scale = 1.0f;
    std::vector<Ffn> experts;  // empty when the routed experts live in experts.inkx
    std::vector<Ffn> shared;
};

struct Weights {
    std::string layout;  // "release" or "transformers"
    Matrix embed;        // [vocab, D]
    std::vector<float> embed_norm;  // empty: no embed norm
    std::vector<float> final_norm;
    Matrix lm_head;      // [unpadded_vocab, D] (rows past it are never read)
    std::vector<LayerWeights> layers;
    std::optional<Matrix> audio_encoder;  // [mel_bins·mel_vocab, D]
    std::vector<float> audio_norm;
    std::size_t matrix_bytes = 0;  // bytes of all matrices (what a full pass may touch)
};

struct Model {
    Config config;
    SafetensorsSet tensors;
    Weights weights;
    std::filesystem::path dir;
    // A converted model's routed experts (`experts.inkx`, read through an expert cache);
    // null when they are tensors in the safetensors files.
    std::shared_ptr<experts::ExpertStore> experts;
};

// Loads config.json and every tensor; checks each shape against the config. Throws
// std::runtime_error naming the tensor, the expected and the found shape. A directory
// with experts.inkx (written by `inkling convert`) takes its routed experts from there:
// the container's geometry must match config.json. `memory`: where the safetensors bytes
// live (WeightsMemory; Model::tensors.copied() says what Auto chose). `lane_order`: int8 and
// int4 weight matrices in the lane order of engine/model/lane_order.h, for kernels that read it
// (cpu::lane_order_active()): the copied safetensors in place, and the expert container's
// records the expert cache keeps (ExpertStore::set_lane_order); mapped safetensors stay in
// column order (Matrix::lane_packed tells).
Model load_model(const std::filesystem::path& dir, WeightsMemory memory = WeightsMemory::Auto,
                 bool lane_order = false);
// `routed_in_container`: the sparse layers' routed expert tensors are not bound (nor
// demanded); LayerWeights::experts stays empty.
Weights bind_weights(const Config& config, const SafetensorsSet& tensors, bool routed_in_container = false);

}  // namespace inkling::model
