#include "engine/model/weights.h"

#include "engine/experts/expert_store.h"

#include <cstdint>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "engine/model/tensor_names.h"
#include "engine/quant/quantize.h"

namespace inkling::model {
namespace {

using Shape = std::vector<std::int64_t>;

std::string shape_text(const Shape& s) {
    std::string t = "[";
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
}

// Looks tensors up by name, checks shapes, remembers which names were used.
class Binder {
public:
    explicit Binder(const SafetensorsSet& set) : set_(set) {}

    bool has(const std::string& name) const { return set_.find(name) != nullptr; }

    const TensorInfo& get(const std::string& name, const Shape& shape) {
        const TensorInfo* t = set_.find(name);
        if (!t) throw std::runtime_error("missing tensor " + name + " (expected shape " + shape_text(shape) + ")");
        if (t->shape != shape)
            throw std::runtime_error("tensor " + name + ": expected shape " + shape_text(shape) + ", found " +
                                     t->shape_text());
        used_.insert(name);
        return *t;
    }

    Matrix matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
        if (quantized(name)) return quantized_views(name, {}, rows, cols)[0];
        const TensorInfo& t = get(name, {rows, cols});
        bytes_ += t.nbytes;
        return {t.data, t.dtype, rows, cols, cols};
    }

    std::vector<float> floats(const TensorInfo& t) {
        if (t.dtype == DType::I8 || t.dtype == DType::U8)
            throw std::runtime_error("tensor " + t.name + ": expected floats, found " + dtype_name(t.dtype));
        Matrix m{t.data, t.dtype, 1, t.numel(), t.numel()};
        std::vector<float> out(static_cast<std::size_t>(t.numel()));
        if (!out.empty()) row_to_f32(m, 0, out.data());
        return out;
    }
    std::vector<float> vec(const std::string& name, const Shape& shape) { return floats(get(name, shape)); }

    // A learned scalar stored as [1] (or []); absent means 1.
    float scalar(const std::string& name) {
        const TensorInfo* t = set_.find(name);
        if (!t) return 1.0f;
        if (t->numel() != 1 || t->shape.size() > 1)
            throw std::runtime_error("tensor " + name + ": expected shape [1], found " + t->shape_text());
        used_.insert(name);
        return floats(*t)[0];
    }

    // Per-expert views of a fused [n, rows, cols] tensor.
    std::vector<Matrix> stacked(const std::string& name, std::int64_t n, std::int64_t rows, std::int64_t cols) {
        if (quantized(name)) return quantized_views(name, {n}, rows, cols);
        const TensorInfo& t = get(name, {n, rows, cols});
        bytes_ += t.nbytes;
        std::vector<Matrix> out;
        for (std::int64_t e = 0; e < n; ++e)
            out.push_back({t.data + static_cast<std::size_t>(e * rows * cols) * dtype_size(t.dtype), t.dtype, rows,
                           cols, cols});
        return out;
    }

    // A quantized matrix (docs/container.md): NAME is I8 [rows, padded] (int8) or U8
    // [rows, padded/2] (int4, two a byte), next to NAME.scales F32 [rows, groups]; stacked
    // tensors carry the same leading dimension `lead` on both.
    bool quantized(const std::string& name) const {
        const TensorInfo* t = set_.find(name);
        return t && (t->dtype == DType::I8 || t->dtype == DType::U8);
    }

    std::vector<Matrix> quantized_views(const std::string& name, const Shape& lead, std::int64_t rows,
                                        std::int64_t cols) {
        const TensorInfo& t = *set_.find(name);
        const bool int4 = t.dtype == DType::U8;
        const std::int64_t padded = quant::padded_cols(cols);
        Shape want = lead, logical = lead;
        want.insert(want.end(), {rows, int4 ? padded / 2 : padded});
        logical.insert(logical.end(), {rows, cols});
        if (t.shape != want)
            throw std::runtime_error("tensor " + name + ": expected shape " + shape_text(want) + " (" +
                                     (int4 ? "int4" : "int8") + " of " + shape_text(logical) +
                                     ", rows padded to " + std::to_string(padded) + " columns), found " +
                                     t.shape_text());
        const std::string scales_name = name + ".scales";
        const TensorInfo* s = set_.find(scales_name);
        Shape scales_want = lead;
        scales_want.push_back(rows);
        std::string expected = "expected F32 " + shape_text(scales_want);
        expected.insert(expected.size() - 1, ", groups");
        scales_want.push_back(0);
        if (!s) throw std::runtime_error("tensor " + name + " is " + dtype_name(t.dtype) + " but " + scales_name +
                                         " is missing (" + expected + ")");
        std::int64_t groups = s->shape.empty() ? 0 : s->shape.back();
        scales_want.back() = groups;
        // The group: the columns a scale covers, a multiple of 32 (the last group may be short).
        const std::int64_t group = groups > 0 ? quant::padded_cols((padded + groups - 1) / groups) : 0;
        if (s->dtype != DType::F32 || s->shape != scales_want || group == 0 ||
            (padded + group - 1) / group != groups)
            throw std::runtime_error("tensor " + scales_name + ": " + expected + " for " + shape_text(want) + " " +
                                     dtype_name(t.dtype) + ", found " + dtype_name(s->dtype) + " " +
                                     s->shape_text());
        if (reinterpret_cast<std::uintptr_t>(s->data) % alignof(float) != 0)
            throw std::runtime_error("tensor " + scales_name + " in " + s->file +
                                     " does not start on a 4-byte boundary; the scales are read in place");
        used_.insert(name);
        used_.insert(scales_name);
        bytes_ += t.nbytes + s->nbytes;
        const std::int64_t n = lead.empty() ? 1 : lead[0];
        const std::size_t row_bytes = dtype_bytes(int4 ? DType::Q4 : DType::I8, padded);
        std::vector<Matrix> out;
        for (std::int64_t e = 0; e < n; ++e) {
            Matrix m;
            m.data = t.data + static_cast<std::size_t>(e * rows) * row_bytes;
            m.dtype = int4 ? DType::Q4 : DType::I8;
            m.rows = rows;
            m.cols = cols;
            m.row_stride = padded;
            m.scales = reinterpret_cast<const float*>(s->data) + e * rows * groups;
            m.group = group;
            m.scale_stride = groups;
            m.lane_packed = t.lane_packed;
            out.push_back(m);
        }
        return out;
    }

    const std::set<std::string>& used() const { return used_; }
    std::size_t bytes() const { return bytes_; }

private:
    const SafetensorsSet& set_;
    std::set<std::string> used_;
    std::size_t bytes_ = 0;
};

// A fused [2I, D] gate/up matrix. Release checkpoints interleave rows (g0, u0, g1, u1, …):
// gate and up are then views with a doubled row stride. Transformers' fused routed tensor
// is grouped: gate rows first, then up rows.
std::pair<Matrix, Matrix> split_gate_up(const Matrix& fused, bool interleaved) {
    std::int64_t inter = fused.rows / 2;
    if (interleaved) {
        Matrix gate = fused;
        gate.rows = inter;
        gate.row_stride *= 2;
        gate.scale_stride *= 2;
        Matrix up = gate;
        up.data = fused.row(1);
        if (fused.scales) up.scales = fused.row_scales(1);
        return {gate, up};
    }
    return {fused.slice_rows(0, inter), fused.slice_rows(inter, inter)};
}

std::vector<float> conv_weights(Binder& b, const std::string& name, std::int64_t channels, int kernel) {
    return b.vec(name, {channels, 1, kernel});
}

}  // namespace

Weights bind_weights(const Config& c, const SafetensorsSet& set, bool routed_in_container) {
    namespace n = tensor_names;
    Binder b(set);
    Weights w;
    const auto& all = set.tensors();
    bool release = false, hf = false;
    for (const auto& [name, _] : all) {
        release = release || name.starts_with(n::kReleasePrefix);
        hf = hf || name.starts_with("model.layers.") || name == n::kEmbed.transformers;
    }
    if (!release && !hf)
        throw std::runtime_error("neither model.llm.* (release layout) nor model.layers.* (transformers layout) "
                                 "tensors found");
    if (release && hf) throw std::runtime_error("both release (model.llm.*) and transformers tensors present");
    w.layout = release ? "release" : "transformers";
    const std::int64_t D = c.hidden, V = c.vocab, U = c.unpadded_vocab;

    auto head = [&](const std::string& name) {
        const TensorInfo* t = set.find(name);
        std::int64_t rows = t && !t->shape.empty() && t->shape[0] == U ? U : V;
        Matrix m = b.matrix(name, rows, D);
        return m.slice_rows(0, U);
    };
    w.embed = b.matrix(n::kEmbed.in(release), V, D);
    const bool a = b.has(n::kEmbedNorm.in(release)), older = !release && b.has(n::kEmbedNormInEmbed);
    if (a && older)
        throw std::runtime_error(std::string("both ") + n::kEmbedNorm.transformers + " and " + n::kEmbedNormInEmbed +
                                 " exist: which is the embed norm is ambiguous");
    if (a) w.embed_norm = b.vec(n::kEmbedNorm.in(release), {D});
    if (older) w.embed_norm = b.vec(n::kEmbedNormInEmbed, {D});
    w.final_norm = b.vec(n::kFinalNorm.in(release), {D});
    w.lm_head = head(n::kLmHead.in(release));

    const int K = c.conv_kernel;
    for (int i = 0; i < c.layers; ++i) {
        const std::int64_t H = c.layer_heads(i), KV = c.layer_kv_heads(i), hd = c.layer_head_dim(i);
        const std::int64_t ext = c.layer_extent(i), kvd = KV * hd;
        LayerWeights L;
        const std::string p = n::layer_prefix(release, i);
        auto name = [&](const n::Name& nm) { return p + nm.in(release); };
        L.attn_norm = b.vec(name(n::kAttnNorm), {D});
        L.mlp_norm = b.vec(name(n::kMlpNorm), {D});
        L.wq = b.matrix(name(n::kWq), H * hd, D);
        L.wk = b.matrix(name(n::kWk), kvd, D);
        L.wv = b.matrix(name(n::kWv), kvd, D);
        L.wr = b.matrix(name(n::kWr), H * c.d_rel, D);
        L.wo = b.matrix(name(n::kWo), D, H * hd);
        L.q_norm = b.vec(name(n::kQNorm), {hd});
        L.k_norm = b.vec(name(n::kKNorm), {hd});
        L.k_conv = conv_weights(b, name(n::kKConv), kvd, K);
        L.v_conv = conv_weights(b, name(n::kVConv), kvd, K);
        L.attn_conv = conv_weights(b, name(n::kAttnConv), D, K);
        L.mlp_conv = conv_weights(b, name(n::kMlpConv), D, K);
        L.rel_bank = b.vec(name(n::kRelBank), {c.d_rel, ext});
        if (!c.kinds[i].sparse) {
            const std::int64_t I = c.dense_inter;
            if (release) {
                const Matrix fused = b.matrix(p + n::kDenseGateUp.release_fused, 2 * I, D);
                auto [gate, up] = split_gate_up(fused, true);
                L.dense = {gate, up, b.matrix(name(n::kDenseDown), D, I), fused};
            } else {
                L.dense = {b.matrix(p + n::kDenseGateUp.transformers_gate, I, D),
                           b.matrix(p + n::kDenseGateUp.transformers_up, I, D), b.matrix(name(n::kDenseDown), D, I)};
            }
            L.dense_scale = b.scalar(name(n::kDenseScale));
        } else {
            const std::int64_t I = c.moe_inter, E = c.experts, S = c.shared_experts;
            L.router = b.matrix(name(n::kRouter), E + S, D);
            L.router_bias = b.vec(name(n::kRouterBias), {E});
            L.router_scale = b.scalar(name(n::kRouterScale));
            if (!routed_in_container) {
                auto fused = b.stacked(name(n::kExpertsGateUp), E, 2 * I, D);
                auto down = b.stacked(name(n::kExpertsDown), E, D, I);
                for (std::int64_t e = 0; e < E; ++e) {
                    auto [gate, up] = split_gate_up(fused[e], release);
                    L.experts.push_back({gate, up, down[e], release ? fused[e] : Matrix{}});
                }
            }
            if (S > 0) {
                if (release) {
                    auto sf = b.stacked(p + n::kSharedGateUp.release_fused, S, 2 * I, D);
                    auto sd = b.stacked(name(n::kSharedDown), S, D, I);
                    for (std::int64_t j = 0; j < S; ++j) {
                        auto [gate, up] = split_gate_up(sf[j], true);
                        L.shared.push_back({gate, up, sd[j], sf[j]});
                    }
                } else {
                    auto g = b.stacked(p + n::kSharedGateUp.transformers_gate, S, I, D);
                    auto u = b.stacked(p + n::kSharedGateUp.transformers_up, S, I, D);
                    auto d = b.stacked(name(n::kSharedDown), S, D, I);
                    for (std::int64_t j = 0; j < S; ++j) L.shared.push_back({g[j], u[j], d[j]});
                }
            }
        }
        w.layers.push_back(std::move(L));
    }

    // The audio tower, from the model or an audio.safetensors sidecar, in either spelling.
    for (bool spelling : {true, false}) {
        if (!b.has(n::kAudioEncoder.in(spelling))) continue;
        w.audio_encoder = b.matrix(n::kAudioEncoder.in(spelling), static_cast<std::int64_t>(c.mel_bins) * c.mel_vocab, D);
        w.audio_norm = b.vec(n::kAudioNorm.in(spelling), {D});
        break;
    }
    w.matrix_bytes = b.bytes();
    for (const auto& [name, _] : all) {
        if (b.used().count(name) || name.starts_with("model.visual.") || name.starts_with("model.mtp.") ||
            name.starts_with("mtp."))
            continue;
        std::fprintf(stderr, "[load] tensor %s is not used\n", name.c_str());
    }
    return w;
}

Model load_model(const std::filesystem::path& dir, WeightsMemory memory, bool lane_order) {
    Model m;
    m.dir = dir;
    m.config = load_config(dir);
    m.tensors = SafetensorsSet::open_dir(dir, memory);
    if (lane_order) {
        if (const std::size_t n = m.tensors.pack_lane_order())
            std::fprintf(stderr, "[load] %zu integer weight tensors in the lane order (AVX-512 VNNI's)\n", n);
    }
    if (std::filesystem::exists(dir / experts::kFileName)) {
        m.experts = experts::ExpertStore::open(dir / experts::kFileName);
        m.experts->check_config(m.config);
        m.experts->set_lane_order(lane_order);
        if (m.experts->lane_order())
            std::fprintf(stderr, "[load] integer experts in the lane order where the cache keeps them (pinned, or all "
                                 "when it holds every expert)\n");
    }
    try {
        m.weights = bind_weights(m.config, m.tensors, m.experts != nullptr);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(dir.string() + ": " + e.what());
    }
    return m;
}

}  // namespace inkling::model
