#include "engine/convert/plan.h"

#include <algorithm>
#include <map>

#include "engine/model/tensor_names.h"

namespace inkling::convert {
namespace {

std::string st_dtype(model::DType t) {
    switch (t) {
    case model::DType::F32: return "F32";
    case model::DType::BF16: return "BF16";
    case model::DType::F16: return "F16";
    case model::DType::I8: return "I8";
    default: return "U8";
    }
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

// Collects the items in loader order, deciding each matrix's storage from the options.
class Builder {
public:
    Builder(const Options& o, std::vector<DenseItem>& items) : o_(o), items_(items) {}

    void floats(const std::string& name, std::vector<std::int64_t> shape, std::vector<float> values) {
        DenseItem it;
        it.name = name;
        it.shape = std::move(shape);
        it.floats = std::move(values);
        items_.push_back(std::move(it));
    }
    void scalar(const std::string& name, float v) { floats(name, {1}, {v}); }
    void conv(const std::string& name, const std::vector<float>& w, std::int64_t kernel) {
        floats(name, {static_cast<std::int64_t>(w.size()) / kernel, 1, kernel}, w);
    }
    // A matrix (or a stack of them) that --dense may quantize; `kind` names it in the report.
    void matrix(const std::string& name, std::vector<model::Matrix> mats, const std::string& kind, bool stacked) {
        const auto store = o_.dense == DenseMode::Keep ? DenseItem::Store::Keep : DenseItem::Store::Quantized;
        add(name, std::move(mats), store, kind, stacked);
    }
    void kept(const std::string& name, const model::Matrix& m) { add(name, {m}, DenseItem::Store::Keep, "", false); }
    void widened(const std::string& name, const model::Matrix& m) {
        add(name, {m}, DenseItem::Store::F32, "", false);
    }

private:
    void add(const std::string& name, std::vector<model::Matrix> mats, DenseItem::Store store,
             const std::string& kind, bool stacked) {
        DenseItem it;
        it.name = name;
        it.store = store;
        it.mats = std::move(mats);
        it.kind = kind;
        const auto& m = it.mats.front();
        if (stacked) it.shape.push_back(static_cast<std::int64_t>(it.mats.size()));
        it.shape.push_back(m.rows);
        it.shape.push_back(m.cols);
        items_.push_back(std::move(it));
    }
    const Options& o_;
    std::vector<DenseItem>& items_;
};

std::vector<model::Matrix> pick(const std::vector<model::Ffn>& ffns, model::Matrix model::Ffn::*which) {
    std::vector<model::Matrix> out;
    for (const auto& f : ffns) out.push_back(f.*which);
    return out;
}

// The dense tensors under their transformers names (engine/model/tensor_names.h), which
// the loader reads back.
void add_dense_items(const model::Model& model, const Options& o, std::vector<DenseItem>& items) {
    namespace n = model::tensor_names;
    const auto& c = model.config;
    const auto& w = model.weights;
    const std::int64_t D = c.hidden;
    Builder b(o, items);
    b.kept(n::kEmbed.transformers, w.embed);
    if (!w.embed_norm.empty()) b.floats(n::kEmbedNorm.transformers, {D}, w.embed_norm);
    b.floats(n::kFinalNorm.transformers, {D}, w.final_norm);
    b.matrix(n::kLmHead.transformers, {w.lm_head}, "lm_head", false);
    for (int i = 0; i < c.layers; ++i) {
        const auto& L = w.layers[static_cast<std::size_t>(i)];
        const std::string p = n::layer_prefix(false, i);
        auto name = [&](const char* suffix) { return p + suffix; };
        const std::int64_t hd = c.layer_head_dim(i), K = c.conv_kernel;
        b.floats(name(n::kAttnNorm.transformers), {D}, L.attn_norm);
        b.floats(name(n::kMlpNorm.transformers), {D}, L.mlp_norm);
        b.matrix(name(n::kWq.transformers), {L.wq}, "attn.q", false);
        b.matrix(name(n::kWk.transformers), {L.wk}, "attn.k", false);
        b.matrix(name(n::kWv.transformers), {L.wv}, "attn.v", false);
        b.matrix(name(n::kWr.transformers), {L.wr}, "attn.r", false);
        b.matrix(name(n::kWo.transformers), {L.wo}, "attn.o", false);
        b.floats(name(n::kQNorm.transformers), {hd}, L.q_norm);
        b.floats(name(n::kKNorm.transformers), {hd}, L.k_norm);
        b.conv(name(n::kKConv.transformers), L.k_conv, K);
        b.conv(name(n::kVConv.transformers), L.v_conv, K);
        b.conv(name(n::kAttnConv.transformers), L.attn_conv, K);
        b.conv(name(n::kMlpConv.transformers), L.mlp_conv, K);
        b.floats(name(n::kRelBank.transformers), {c.d_rel, c.layer_extent(i)}, L.rel_bank);
        if (!c.kinds[static_cast<std::size_t>(i)].sparse) {
            b.matrix(name(n::kDenseGateUp.transformers_gate), {L.dense.gate}, "dense_mlp", false);
            b.matrix(name(n::kDenseGateUp.transformers_up), {L.dense.up}, "dense_mlp", false);
            b.matrix(name(n::kDenseDown.transformers), {L.dense.down}, "dense_mlp", false);
            b.scalar(name(n::kDenseScale.transformers), L.dense_scale);
            continue;
        }
        b.widened(name(n::kRouter.transformers), L.router);
        b.floats(name(n::kRouterBias.transformers), {c.experts}, L.router_bias);
        b.scalar(name(n::kRouterScale.transformers), L.router_scale);
        if (!L.shared.empty()) {
            b.matrix(name(n::kSharedGateUp.transformers_gate), pick(L.shared, &model::Ffn::gate), "shared_experts", true);
            b.matrix(name(n::kSharedGateUp.transformers_up), pick(L.shared, &model::Ffn::up), "shared_experts", true);
            b.matrix(name(n::kSharedDown.transformers), pick(L.shared, &model::Ffn::down), "shared_experts", true);
        }
    }
    if (o.keep_audio && w.audio_encoder) {
        b.kept(n::kAudioEncoder.transformers, *w.audio_encoder);
        b.floats(n::kAudioNorm.transformers, {D}, w.audio_norm);
    }
}

// The entries of one item: NAME, and NAME.scales when quantized.
void add_entries(DenseItem& it, const Scheme& scheme, std::vector<SafetensorsEntry>& entries) {
    SafetensorsEntry e{it.name, "F32", it.shape, 0, 0};
    switch (it.store) {
    case DenseItem::Store::Floats: e.bytes = 4 * static_cast<std::int64_t>(it.floats.size()); break;
    case DenseItem::Store::F32: e.bytes = 4 * numel(it.shape); break;
    case DenseItem::Store::Keep:
        e.dtype = st_dtype(it.mats.front().dtype);
        e.bytes = static_cast<std::int64_t>(model::dtype_bytes(it.mats.front().dtype, numel(it.shape)));
        break;
    case DenseItem::Store::Quantized: {
        const std::int64_t cols = it.shape.back(), rows = numel(it.shape) / cols;
        e.dtype = scheme.dtype == model::DType::I8 ? "I8" : "U8";
        e.shape.back() = scheme.row_bytes(cols);
        e.bytes = rows * scheme.row_bytes(cols);
        SafetensorsEntry s{it.name + ".scales", "F32", it.shape, 0, 0};
        s.shape.back() = scheme.groups(cols);
        s.bytes = 4 * rows * scheme.groups(cols);
        it.scales_entry = entries.size() + 1;
        entries.push_back(std::move(e));
        entries.push_back(std::move(s));
        it.entry = entries.size() - 2;
        return;
    }
    }
    it.entry = entries.size();
    entries.push_back(std::move(e));
}

}  // namespace

std::int64_t DenseItem::source_bytes() const {
    if (store == Store::Floats) return 0;
    std::int64_t n = 0;
    for (const auto& m : mats) n += static_cast<std::int64_t>(m.bytes());
    return n;
}

std::int64_t expert_source_bytes(const model::Ffn& f) {
    return static_cast<std::int64_t>(f.gate.bytes() + f.up.bytes() + f.down.bytes());
}

std::int64_t Plan::output_bytes() const {
    return layout.file_bytes + (has_experts ? experts.file_bytes() : 0) + copied_bytes;
}

Plan make_plan(const model::Model& model, const Options& o) {
    namespace fs = std::filesystem;
    Plan plan;
    add_dense_items(model, o, plan.dense);
    std::vector<SafetensorsEntry> entries;
    const Scheme ds = dense_scheme(o.dense);
    for (auto& it : plan.dense) {
        add_entries(it, ds, entries);
        plan.dense_source_bytes += it.source_bytes();
    }
    // The layout reorders entries: map each item's indices to the final order.
    std::vector<std::string> names;
    for (const auto& e : entries) names.push_back(e.name);
    plan.layout = layout_safetensors(std::move(entries));
    std::map<std::string, std::size_t> placed;
    for (std::size_t k = 0; k < plan.layout.entries.size(); ++k) placed[plan.layout.entries[k].name] = k;
    for (auto& it : plan.dense) {
        it.entry = placed.at(names[it.entry]);
        if (it.store == DenseItem::Store::Quantized) it.scales_entry = placed.at(names[it.scales_entry]);
    }

    const auto& c = model.config;
    plan.expert_scheme = expert_scheme(o.experts);
    for (int i = 0; i < c.layers; ++i) {
        if (!c.kinds[static_cast<std::size_t>(i)].sparse) continue;
        plan.experts.layers.push_back(i);
        for (const auto& f : model.weights.layers[static_cast<std::size_t>(i)].experts)
            plan.expert_source_bytes += expert_source_bytes(f);
    }
    plan.has_experts = !plan.experts.layers.empty();
    if (plan.has_experts) {
        auto& h = plan.experts;
        h.format = o.experts;
        h.group = o.experts == experts::Format::Int4 ? kExpertGroup : 0;
        h.hidden = c.hidden;
        h.inter = c.moe_inter;
        h.experts = c.experts;
        h.source = fs::weakly_canonical(o.src).string();
        // Settles record_bytes and data_offset (the CRCs come later).
        experts::encode_header(h, std::vector<std::uint32_t>(static_cast<std::size_t>(h.record_count()), 0));
    }

    static const char* kCopied[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                    "special_tokens_map.json", "generation_config.json"};
    for (const char* name : kCopied)
        if (fs::is_regular_file(o.src / name)) plan.copied.push_back(name);
    for (const auto& e : fs::directory_iterator(o.src))
        if (e.is_regular_file() && e.path().filename().string().starts_with("chat_template"))
            plan.copied.push_back(e.path().filename().string());
    std::sort(plan.copied.begin() + 1, plan.copied.end());
    for (const auto& name : plan.copied) plan.copied_bytes += static_cast<std::int64_t>(fs::file_size(o.src / name));

    if (!o.keep_audio) {
        DroppedPart audio{"audio tower", 0, 0};
        for (const auto& [name, t] : model.tensors.tensors())
            if (name.starts_with("model.audio.") || name.starts_with("model.audio_tower.")) {
                ++audio.tensors;
                audio.bytes += static_cast<std::int64_t>(t.nbytes);
            }
        if (audio.tensors > 0) plan.dropped.push_back(audio);
    }
    return plan;
}

}  // namespace inkling::convert
