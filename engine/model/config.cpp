#include "engine/model/config.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace inkling::model {
namespace {

using nlohmann::json;

class Reader {
public:
    Reader(const json& text, const json& root, std::string origin)
        : text_(text), root_(root), origin_(std::move(origin)) {}

    [[noreturn]] void fail(const std::string& key, const std::string& why) const {
        throw std::runtime_error(origin_ + ": key '" + key + "' " + why);
    }

    const json* find(const json& obj, const std::string& key) const {
        auto it = obj.find(key);
        return it == obj.end() || it->is_null() ? nullptr : &*it;
    }
    // First present key among aliases, in the text config.
    const json* text_key(std::initializer_list<const char*> keys) const {
        for (const char* k : keys)
            if (const json* v = find(text_, k)) return v;
        return nullptr;
    }

    long long integer(std::initializer_list<const char*> keys, std::optional<long long> fallback,
                      long long min = 0) const {
        const json* v = text_key(keys);
        std::string name = *keys.begin();
        if (!v) {
            if (!fallback) fail(name, "is missing");
            return *fallback;
        }
        if (!v->is_number_integer()) fail(name, "must be an integer, got " + v->dump());
        long long x = v->get<long long>();
        if (x < min) fail(name, "must be at least " + std::to_string(min) + ", got " + std::to_string(x));
        return x;
    }
    double number(std::initializer_list<const char*> keys, double fallback) const {
        const json* v = text_key(keys);
        if (!v) return fallback;
        if (!v->is_number()) fail(*keys.begin(), "must be a number, got " + v->dump());
        return v->get<double>();
    }
    // Root first (released configs), then the text config.
    const json* root_or_text(const std::string& key) const {
        if (const json* v = find(root_, key)) return v;
        return find(text_, key);
    }

    const json& text_;
    const json& root_;
    std::string origin_;
};

}  // namespace

Config parse_config(const std::string& json_text, const std::string& origin) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::parse_error& e) {
        throw std::runtime_error(origin + ": not valid JSON: " + e.what());
    }
    if (!root.is_object()) throw std::runtime_error(origin + ": not a JSON object");
    const json* nested = root.contains("text_config") && root["text_config"].is_object()
                             ? &root["text_config"] : nullptr;
    const json& text = nested ? *nested : root;
    Reader r(text, root, origin);

    Config c;
    c.hidden = static_cast<int>(r.integer({"hidden_size"}, std::nullopt, 1));
    c.layers = static_cast<int>(r.integer({"num_hidden_layers"}, std::nullopt, 1));
    c.vocab = static_cast<int>(r.integer({"vocab_size"}, std::nullopt, 1));
    c.unpadded_vocab = static_cast<int>(r.integer({"unpadded_vocab_size"}, c.vocab, 1));
    if (c.unpadded_vocab > c.vocab)
        r.fail("unpadded_vocab_size", "exceeds vocab_size " + std::to_string(c.vocab));
    c.heads = static_cast<int>(r.integer({"num_attention_heads"}, std::nullopt, 1));
    c.kv_heads = static_cast<int>(r.integer({"num_key_value_heads"}, c.heads, 1));
    c.head_dim = static_cast<int>(r.integer({"head_dim"}, c.hidden / c.heads, 1));
    c.swa_heads = static_cast<int>(r.integer({"swa_num_attention_heads"}, c.heads, 1));
    c.swa_kv_heads = static_cast<int>(r.integer({"swa_num_key_value_heads"}, c.kv_heads, 1));
    c.swa_head_dim = static_cast<int>(r.integer({"swa_head_dim"}, c.head_dim, 1));
    c.window = static_cast<int>(r.integer({"sliding_window_size", "sliding_window"}, 512, 1));
    c.d_rel = static_cast<int>(r.integer({"d_rel"}, 16, 1));
    c.rel_extent = static_cast<int>(r.integer({"rel_extent"}, 1024, 1));
    c.log_floor = r.number({"log_scaling_n_floor"}, 0.0);
    c.log_alpha = r.number({"log_scaling_alpha"}, 0.1);
    c.conv_kernel = static_cast<int>(r.integer({"sconv_kernel_size", "conv_kernel_size"}, 4, 1));
    c.experts = static_cast<int>(r.integer({"n_routed_experts", "num_local_experts"}, 0, 0));
    c.top_k = static_cast<int>(r.integer({"num_experts_per_tok"}, 0, 0));
    c.shared_experts = static_cast<int>(r.integer({"n_shared_experts"}, 0, 0));
    c.eps = r.number({"rms_norm_eps"}, 1e-6);
    c.route_scale = r.number({"route_scale"}, 8.0);
    c.mup = r.number({"logits_mup_width_multiplier", "embedding_multiplier"}, 24.0);
    if (c.mup == 0.0) r.fail("logits_mup_width_multiplier", "must not be 0");

    // Widths: a released config names the dense width `dense_intermediate_size` and the
    // expert width `intermediate_size`; a transformers-saved one names the dense width
    // `intermediate_size` and the expert width `moe_intermediate_size`.
    if (r.text_key({"dense_intermediate_size"})) {
        c.dense_inter = static_cast<int>(r.integer({"dense_intermediate_size"}, std::nullopt, 1));
        c.moe_inter = static_cast<int>(r.integer({"moe_intermediate_size", "intermediate_size"}, 3072, 1));
    } else {
        c.dense_inter = static_cast<int>(r.integer({"intermediate_size"}, 24576, 1));
        c.moe_inter = static_cast<int>(r.integer({"moe_intermediate_size"}, 3072, 1));
    }

    // Layer kinds: layer_types, else local_layer_ids, else every 6th layer is global.
    c.kinds.assign(c.layers, {});
    const json* types = r.text_key({"layer_types"});
    const json* local_ids = r.text_key({"local_layer_ids"});
    if (types) {
        if (!types->is_array() || static_cast<int>(types->size()) != c.layers)
            r.fail("layer_types", "must list " + std::to_string(c.layers) + " layer types");
        for (int i = 0; i < c.layers; ++i) {
            const json& t = (*types)[i];
            if (!t.is_string() || (t != "hybrid" && t != "hybrid_sliding"))
                r.fail("layer_types", "entry " + std::to_string(i) + " is " + t.dump() +
                                          "; expected \"hybrid\" or \"hybrid_sliding\"");
            c.kinds[i].local = t == "hybrid_sliding";
        }
    } else if (local_ids) {
        if (!local_ids->is_array()) r.fail("local_layer_ids", "must be an array of layer ids");
        for (const json& id : *local_ids) {
            if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= c.layers)
                r.fail("local_layer_ids", "has " + id.dump() + ", not a layer id below " +
                                              std::to_string(c.layers));
            c.kinds[id.get<int>()].local = true;
        }
    } else {
        for (int i = 0; i < c.layers; ++i) c.kinds[i].local = (i + 1) % 6 != 0;
    }
    // MLP kinds: mlp_layer_types, else layers at or past dense_mlp_idx are MoE.
    if (const json* mlp = r.text_key({"mlp_layer_types"})) {
        if (!mlp->is_array() || static_cast<int>(mlp->size()) != c.layers)
            r.fail("mlp_layer_types", "must list " + std::to_string(c.layers) + " entries");
        for (int i = 0; i < c.layers; ++i) {
            const json& t = (*mlp)[i];
            if (!t.is_string() || (t != "dense" && t != "sparse"))
                r.fail("mlp_layer_types", "entry " + std::to_string(i) + " is " + t.dump() +
                                              "; expected \"dense\" or \"sparse\"");
            c.kinds[i].sparse = t == "sparse";
        }
    } else {
        long long first_sparse = r.integer({"dense_mlp_idx"}, 0);
        for (int i = 0; i < c.layers; ++i) c.kinds[i].sparse = i >= first_sparse;
    }
    for (int i = 0; i < c.layers; ++i) {
        if (c.kinds[i].sparse && (c.experts < 1 || c.top_k < 1 || c.top_k > c.experts))
            r.fail("num_experts_per_tok", "must lie in 1..n_routed_experts (" + std::to_string(c.experts) +
                                              ") when MoE layers exist");
        int h = c.layer_heads(i), kv = c.layer_kv_heads(i);
        if (h % kv != 0)
            r.fail(c.kinds[i].local ? "swa_num_key_value_heads" : "num_key_value_heads",
                   "must divide the head count " + std::to_string(h));
    }

    // Root keys (released configs keep these outside text_config).
    if (const json* eos = r.root_or_text("eos_token_id")) {
        if (eos->is_array()) {
            if (!eos->empty()) c.eos = (*eos)[0].get<long long>();
        } else if (eos->is_number_integer()) {
            c.eos = eos->get<long long>();
        } else {
            r.fail("eos_token_id", "must be an integer");
        }
    }
    if (const json* audio = r.find(root, "audio_token_id")) {
        if (!audio->is_number_integer()) r.fail("audio_token_id", "must be an integer");
        c.audio_token = audio->get<std::int32_t>();
    }
    if (const json* ac = r.find(root, "audio_config"); ac && ac->is_object()) {
        if (auto it = ac->find("n_mel_bins"); it != ac->end() && it->is_number_integer())
            c.mel_bins = it->get<int>();
        if (auto it = ac->find("mel_vocab_size"); it != ac->end() && it->is_number_integer())
            c.mel_vocab = it->get<int>();
    }
    return c;
}

Config load_config(const std::filesystem::path& model_dir) {
    auto path = model_dir / "config.json";
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open (is this a model directory?)");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), path.string());
}

}  // namespace inkling::model
