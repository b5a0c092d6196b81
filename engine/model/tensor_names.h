// The checkpoint tensor names in the two layouts, release (`model.llm.*`) and transformers
// (`model.layers.N.*`): the one C++ table the loader binds by (weights.cpp) and the converter
// writes by (convert/plan.cpp). Its Python twin is tools/reference/tensor_names.py.
//
//   const std::string p = tensor_names::layer_prefix(release, i);
//   L.wq = b.matrix(p + tensor_names::kWq.in(release), H * hd, D);
//
// A layer's names follow its prefix. Gate and up: a release checkpoint fuses them in one
// tensor, rows interleaved (g0, u0, g1, u1, …); transformers keeps two tensors for the dense
// MLP and the shared experts, and one for the routed experts, grouped (gate rows, then up).
#pragma once

#include <string>

namespace inkling::model::tensor_names {

struct Name {
    const char* release;
    const char* transformers;
    const char* in(bool release_layout) const { return release_layout ? release : transformers; }
};

// Gate and up of a dense MLP or of the shared experts: one release tensor, two transformers ones.
struct GateUp {
    const char* release_fused;
    const char* transformers_gate;
    const char* transformers_up;
};

inline constexpr const char* kReleasePrefix = "model.llm.";  // every release tensor of the LM

// Whole model.
inline constexpr Name kEmbed{"model.llm.embed.weight", "model.embed_tokens.weight"};
inline constexpr Name kEmbedNorm{"model.llm.embed_norm.weight", "model.embed_norm.weight"};
// An older transformers spelling of the embed norm, also read.
inline constexpr const char* kEmbedNormInEmbed = "model.embed_tokens.embed_norm.weight";
inline constexpr Name kFinalNorm{"model.llm.norm.weight", "model.norm.weight"};
inline constexpr Name kLmHead{"model.llm.unembed.weight", "lm_head.weight"};

// Per layer: attention.
inline constexpr Name kAttnNorm{"attn_norm.weight", "input_layernorm.weight"};
inline constexpr Name kMlpNorm{"mlp_norm.weight", "post_attention_layernorm.weight"};
inline constexpr Name kWq{"attn.wq_du.weight", "self_attn.q_proj.weight"};
inline constexpr Name kWk{"attn.wk_dv.weight", "self_attn.k_proj.weight"};
inline constexpr Name kWv{"attn.wv_dv.weight", "self_attn.v_proj.weight"};
inline constexpr Name kWr{"attn.wr_du.weight", "self_attn.r_proj.weight"};
inline constexpr Name kWo{"attn.wo_ud.weight", "self_attn.o_proj.weight"};
inline constexpr Name kQNorm{"attn.q_norm.weight", "self_attn.q_norm.weight"};
inline constexpr Name kKNorm{"attn.k_norm.weight", "self_attn.k_norm.weight"};
inline constexpr Name kKConv{"attn.k_sconv.weight", "self_attn.k_sconv.conv1d.weight"};
inline constexpr Name kVConv{"attn.v_sconv.weight", "self_attn.v_sconv.conv1d.weight"};
inline constexpr Name kAttnConv{"attn_sconv.weight", "attn_sconv.conv1d.weight"};
inline constexpr Name kMlpConv{"mlp_sconv.weight", "mlp_sconv.conv1d.weight"};
inline constexpr Name kRelBank{"attn.rel_logits_proj.proj", "self_attn.rel_logits_proj.proj"};

// Per layer: the dense MLP.
inline constexpr GateUp kDenseGateUp{"mlp.w13_dn.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight"};
inline constexpr Name kDenseDown{"mlp.w2_md.weight", "mlp.down_proj.weight"};
inline constexpr Name kDenseScale{"mlp.global_scale", "mlp.global_scale"};

// Per layer: the MoE.
inline constexpr Name kRouter{"mlp.gate.weight", "mlp.gate.weight"};
inline constexpr Name kRouterBias{"mlp.gate.bias", "mlp.gate.e_score_correction_bias"};
inline constexpr Name kRouterScale{"mlp.gate.global_scale", "mlp.gate.global_scale"};
inline constexpr Name kExpertsGateUp{"mlp.experts.w13_weight", "mlp.experts.gate_up_proj"};  // [E, 2I, D]
inline constexpr Name kExpertsDown{"mlp.experts.w2_weight", "mlp.experts.down_proj"};        // [E, D, I]
inline constexpr GateUp kSharedGateUp{"mlp.shared_experts.shared_w13_weight", "mlp.shared_experts.gate_proj",
                                      "mlp.shared_experts.up_proj"};
inline constexpr Name kSharedDown{"mlp.shared_experts.shared_w2_weight", "mlp.shared_experts.down_proj"};

// The audio tower (in the model or an audio.safetensors sidecar, in either spelling).
inline constexpr Name kAudioEncoder{"model.audio.encoder.weight",
                                    "model.audio_tower.embed_audio_tokens.embed_audio_tokens.weight"};
inline constexpr Name kAudioNorm{"model.audio.final_norm.weight", "model.audio_tower.norm.weight"};

// "model.llm.layers.N." or "model.layers.N.".
inline std::string layer_prefix(bool release_layout, int layer) {
    return std::string(release_layout ? "model.llm.layers." : "model.layers.") + std::to_string(layer) + ".";
}

}  // namespace inkling::model::tensor_names
