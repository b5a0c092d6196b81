// The model geometry as the engine understands it, read from config.json in either
// form: as released (text fields nested under `text_config`, `eos_token_id`,
// `audio_token_id` and `audio_config` at the root) or as transformers' save_pretrained
// writes it (flat). Key precedence is transformers' (docs/model.md, "Config").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace inkling::model {

struct LayerKind {
    bool local = false;   // sliding-window attention ("hybrid_sliding")
    bool sparse = false;  // MoE MLP (else dense)
};

struct Config {
    int hidden = 0;              // D
    int layers = 0;
    int vocab = 0;               // rows of the embedding (padded)
    int unpadded_vocab = 0;      // logits are computed over [0, unpadded_vocab)
    // Global ("hybrid") attention layers.
    int heads = 0, kv_heads = 0, head_dim = 0;
    // Sliding ("hybrid_sliding") attention layers.
    int swa_heads = 0, swa_kv_heads = 0, swa_head_dim = 0;
    int window = 0;              // keys per local query, self included
    int d_rel = 0;               // rank of the relative-bias mixer
    int rel_extent = 0;          // bias-bank length on global layers
    double log_floor = 0;        // tau threshold; 0 = no tau
    double log_alpha = 0.1;
    int conv_kernel = 4;
    int experts = 0, top_k = 0, shared_experts = 0;
    int dense_inter = 0, moe_inter = 0;
    double eps = 1e-6;
    double route_scale = 8.0;
    double mup = 24.0;           // final hidden ÷ mup before lm_head
    std::int64_t eos = -1;       // -1: never stops
    std::int32_t audio_token = 200023;
    int mel_bins = 80, mel_vocab = 16;
    std::vector<LayerKind> kinds;

    // Per-layer geometry.
    int layer_heads(int i) const { return kinds[i].local ? swa_heads : heads; }
    int layer_kv_heads(int i) const { return kinds[i].local ? swa_kv_heads : kv_heads; }
    int layer_head_dim(int i) const { return kinds[i].local ? swa_head_dim : head_dim; }
    int layer_extent(int i) const { return kinds[i].local ? window : rel_extent; }
};

// Throws std::runtime_error naming the file and the key when config.json is missing,
// unreadable, or describes an impossible geometry.
Config load_config(const std::filesystem::path& model_dir);
Config parse_config(const std::string& json_text, const std::string& origin);

}  // namespace inkling::model
