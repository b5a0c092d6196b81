// The chain's shader ops, one recording call per shader (shaders/NAME.comp), each with its
// push constants beside it. The chain, the device benchmark and the backend-ops parity
// harness (tests/vulkan/backend_ops_test.cpp) all record through these, so a shader's
// interface is written once on the host side.
//
//   vulkan::Ops ops(ctx);
//   frame.begin();
//   ops.rmsnorm(frame, {segments, n, 0, n, 0, n, 0, eps, 0}, x, weight, out);
//   frame.run();
//
// Offsets and strides count floats (weights of gemv: elements). Every op writes only
// what its push constants name; the parity harness checks that with guarded buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/vulkan/buffer.h"
#include "engine/vulkan/context.h"
#include "engine/vulkan/frame.h"
#include "engine/vulkan/kernel.h"

namespace inkling::vulkan {

// gemv.comp: y[s][o] = Σ_i x[s][i]·W[o][i] for s < S, o < O (f32 or bf16 weights).
struct GemvPush {
    std::uint32_t O, I, S;            // output rows, columns, activation rows
    std::uint32_t stride, w_off;      // weight row stride and first element
    std::uint32_t x_off, x_stride;    // first float of x, floats between its rows
    std::uint32_t y_off, y_stride;    // first float of y, floats between its rows
    std::uint32_t swiglu = 0;         // set by Ops::gemv from its `up` argument
};

// rmsnorm.comp: out[g] = x[g] / sqrt(mean(x[g]²) + eps) ⊙ weight over `segments` segments
// of n floats; mode bit 1 also multiplies by `scale`, bit 2 (add_rmsnorm) first adds a[g]
// into x[g]. In place allowed.
struct NormPush {
    std::uint32_t segments, n, x_off, x_stride, o_off, o_stride, mode;
    float eps, scale;
};

// ew.comp: element-wise steps over n floats (see the shader for each op).
enum class EwOp : std::uint32_t { Add = 0, Swiglu = 1, Scale = 2, Combine = 3 };
struct EwPush {
    std::uint32_t op, n, width, shared_n;
    float scale;
};

// sconv.comp: the depthwise causal short conv with the residual inside over one span.
struct ConvPush {
    std::uint32_t rows, channels, kernel, x_off, st_off;
};

// relattn.comp: Inkling attention for one session's span, one workgroup per (row, head);
// for decode, relattn_split.comp + relattn_merge.comp: several workgroups per (row, head),
// each over a chunk of positions, joined by their softmax statistics (AttnSplit).
struct AttnPush {
    std::uint32_t first, rows, pos0, H, KV, hd, d_rel, ext, window, mrows, lo;
    float inv_hd;
};
struct AttnBuffers {
    const Buffer *q, *k_fresh, *v_fresh, *k_mirror, *v_mirror, *r, *bank, *out;
    Binding tau;  // [R] (a slice of a bigger buffer)
    const Buffer* host_part;
    // Scratch for the split path's partials, from its offset on (Ops::attn_part_floats);
    // no buffer, or a range too small for the rule's split: the one-workgroup kernel.
    // Calls recorded with no barrier between them (a frame's spans of one layer) need
    // ranges that do not overlap.
    Binding part{nullptr};
};
// How relattn runs one call: chunks 0 is relattn.comp; else relattn_split.comp over
// `chunks` chunks of `chunk` visible positions per (row, head), a barrier, relattn_merge.comp.
struct AttnSplit {
    std::uint32_t chunk = 0, chunks = 0;
};

// conv_norm.comp: sconv over a span's rows of `channels` (= heads × hd), then each head's
// RMSNorm of hd with one weight — the K rows' conv and k-norm in one dispatch.
struct ConvNormPush {
    std::uint32_t rows, channels, kernel, x_off, st_off;
    std::uint32_t hd;
    float eps;
};

// conv_add_norm.comp: for one span of one row at batch row `row`: x += sconv(a) (the state
// at st_off advanced), h = rmsnorm(x) ⊙ weight — sconv, ew ADD and rmsnorm in one dispatch.
struct ConvAddNormPush {
    std::uint32_t row, channels, kernel, st_off;
    float eps;
    std::uint32_t K = 0, NS = 0, n = 0;  // set by Ops::conv_add_norm from its join
};
// The MoE join conv_add_norm computes its input from instead of reading a: moe_join's
// buffers and counts (JoinPush's K, NS; n = R·D).
struct JoinInput {
    const Buffer *y, *route_w, *shared, *shared_w;
    std::uint32_t K, NS, n;
};

// kvstore.comp: a span's fresh K or V rows into a session's mirror ring.
struct KvStorePush {
    std::uint32_t first, rows, pos0, KV, hd, mrows;
};

// moe_route.comp: the router's top-k per row, pairs in increasing expert id.
struct RoutePush {
    std::uint32_t R, E, NS, K;
    float scale;         // route_scale × the layer's router scale
    std::uint32_t D = 0;  // set by Ops::moe_router_route: the logits computed from h
};

// moe_gemv.comp: y[q][o] = Σ_i W_slot(route[q])[o][i] · x[q / x_div][i] over the slots
// [s_first, s_first + s_count) packed in one binding.
struct MoeGemvPush {
    std::uint32_t O, I, pairs, x_div;
    std::uint32_t s_first, s_count;
    std::uint32_t swiglu = 0;  // set by Ops::moe_gemv from its `up` argument
};

// qact.comp: `rows` rows of `cols` floats (x_off, x_stride) quantized to int8 blocks of 32
// for integer weights, as quant::quantize_activations: q [rows][blocks·32] packed 4 a word,
// scales [rows][blocks].
struct QactPush {
    std::uint32_t rows, cols, blocks, x_off, x_stride;
    std::uint32_t swiglu = 0;  // set by Ops::qact from its `up` argument
};

// moe_gemv_int.comp: moe_gemv over int8 (int4: true) expert slots, the activations from
// qact.comp; each slot's rows then its scales, `slot_words` 32-bit words a slot.
struct MoeIntPush {
    std::uint32_t O, pairs, x_div;
    std::uint32_t s_first, s_count;
    std::uint32_t blocks, groups, gblocks;  // a weight row's blocks of 32, scales, blocks a scale
    std::uint32_t slot_words;
};

// moe_join.comp: a = Σ_k w·y over each row's pairs + Σ_j sw·shared_j.
struct JoinPush {
    std::uint32_t n, D, K, NS;
};

class Ops {
public:
    explicit Ops(Context& ctx);
    ~Ops();

    // With `up`, x holds gate rows and the activations are silu(x)·up (the MLP's SwiGLU, as
    // ew's: no SwiGLU dispatch and barrier before a down projection). Also moe_gemv, qact.
    void gemv(Frame& f, bool bf16, const Buffer& w, const Buffer& x, const Buffer& y, const GemvPush& p,
              const Buffer* up = nullptr) const;
    // The same product through gemm.comp (tiles of 32 rows × 64 outputs; each weight read once
    // per 32 rows). gemv() takes it for p.S ≥ gemm_rows() (0: never, the default until a
    // device benchmark says where it pays; `--vk-gemm-rows`).
    void gemm(Frame& f, bool bf16, const Buffer& w, const Buffer& x, const Buffer& y, const GemvPush& p,
              const Buffer* up = nullptr) const;
    void set_gemm_rows(std::uint32_t rows) { gemm_rows_ = rows; }
    std::uint32_t gemm_rows() const { return gemm_rows_; }
    void rmsnorm(Frame& f, const NormPush& p, const Buffer& x, const Buffer& weight, const Buffer& out) const;
    // x += a (written back), then out = rmsnorm(x) ⊙ weight: the residual add and the norm
    // after it in one dispatch (a at the same offsets as x).
    void add_rmsnorm(Frame& f, const NormPush& p, const Buffer& x, const Buffer& a, const Buffer& weight,
                     const Buffer& out) const;
    // a op= b (Add, Swiglu, Scale with p.scale).
    void ew(Frame& f, EwOp op, const Buffer& a, const Buffer& b, std::uint32_t n, float scale = 1.0f) const;
    // A down projection's SwiGLU taken apart when `apart` (more rows than one token's): gate[i]
    // = silu(gate[i])·up[i] for i < n once an element (ew), then a barrier, so the product
    // reads gate as it is — inside a product the exact SwiGLU (shaders/pointwise.glsl) would
    // be computed again for every output row (prefill 20 % slower on the H100). One token's
    // rows keep it inside (a dispatch and a barrier saved; its arithmetic hides behind the
    // weights' reads). Returns `apart`.
    bool swiglu_apart(Frame& f, const Buffer& gate, const Buffer& up, std::uint32_t n, bool apart) const;
    // a = routed + Σ_j w[row][j]·shared[j] over rows of `width` floats.
    void combine(Frame& f, const Buffer& a, const Buffer& routed, const Buffer& shared, const Buffer& weights,
                 std::uint32_t n, std::uint32_t width, std::uint32_t shared_n) const;
    void sconv(Frame& f, const ConvPush& p, const Buffer& x, const Buffer& w, const Buffer& state) const;
    // The split attn_split(p) picks where b.part's range holds its partials, else relattn.comp.
    void relattn(Frame& f, const AttnPush& p, const AttnBuffers& b) const;
    // As `s` says (the tests force both paths); a split needs b.part.
    void relattn(Frame& f, const AttnPush& p, const AttnBuffers& b, const AttnSplit& s) const;
    // The rule (ops.cpp): the split, in chunks of at least 32 positions that make up to
    // 1024 workgroups (one chunk a (row, head) past 512 rows × heads); {} (the one-workgroup
    // kernel) past 4096 rows × heads, head dims past 256 or d_rel past 64.
    static AttnSplit attn_split(const AttnPush& p);
    // A split into chunks of `chunk` positions (at least 1), whatever the rule says.
    static AttnSplit attn_split(const AttnPush& p, std::uint32_t chunk);
    // Floats of partials a call writes: under the rule, or with split s (0: no split).
    static std::size_t attn_part_floats(const AttnPush& p);
    static std::size_t attn_part_floats(const AttnPush& p, const AttnSplit& s);
    // Floats that hold the rule's partials of any call of at most 1024 rows × heads whose
    // heads have at most hd dims, whatever its positions (1024 · (hd + 2)): a decode span's
    // range. A bigger call (a prefill) splits only if its range holds attn_part_floats(p).
    static std::size_t attn_part_floats_max(std::uint32_t hd);
    void kvstore(Frame& f, const KvStorePush& p, const Buffer& fresh, const Buffer& ring) const;
    // With `join`, the conv's input is that MoE join, computed in the dispatch (a not read).
    void conv_norm(Frame& f, const ConvNormPush& p, const Buffer& x, const Buffer& conv_w, const Buffer& state,
                   const Buffer& norm_w) const;
    void conv_add_norm(Frame& f, const ConvAddNormPush& p, const Buffer& x, const Buffer& a, const Buffer& conv_w,
                       const Buffer& state, const Buffer& norm_w, const Buffer& h,
                       const JoinInput* join = nullptr) const;
    void moe_route(Frame& f, const RoutePush& p, const Binding& logits, const Buffer& bias, const Binding& route_e,
                   const Buffer& route_w, const Buffer& shared_w) const;
    // The router's logits and top-k in one dispatch (moe_route.comp with D > 0): for routers
    // whose matrix one workgroup reads fast (router_fits); the logits are the router gemv's bits.
    void moe_router_route(Frame& f, const RoutePush& p, bool bf16, const Buffer& router, std::uint32_t D,
                          const Buffer& h, const Buffer& bias, const Binding& route_e, const Buffer& route_w,
                          const Buffer& shared_w) const;
    static bool router_fits(std::uint32_t experts, std::uint32_t shared, std::uint32_t D, bool bf16);
    void moe_gemv(Frame& f, bool bf16, const MoeGemvPush& p, const Buffer& w, const Buffer& x, const Buffer& y,
                  const Binding& route_e, const Buffer& slots, const Buffer* up = nullptr) const;
    // Whether qact and moe_gemv_int exist (the device has shaderFloat64).
    bool int_experts() const { return qact_ != nullptr; }
    void qact(Frame& f, const QactPush& p, const Buffer& x, const Buffer& q, const Buffer& scales,
              const Buffer* up = nullptr) const;
    void moe_gemv_int(Frame& f, bool int4, const MoeIntPush& p, const Buffer& w, const Buffer& xq, const Buffer& xs,
                      const Buffer& y, const Binding& route_e, const Buffer& slots) const;
    void moe_join(Frame& f, const JoinPush& p, const Buffer& a, const Buffer& y, const Buffer& route_w,
                  const Buffer& shared, const Buffer& shared_w) const;

private:
    std::uint32_t gemm_rows_ = 0;
    std::unique_ptr<Kernel> gemm_f32_, gemm_bf16_;
    std::unique_ptr<Kernel> gemv_f32_, gemv_bf16_, rmsnorm_, ew_, sconv_, attn_;
    std::unique_ptr<Kernel> attn_split_[4], attn_merge_[4];  // dims a lane: 1, 2, 4, 8
    std::unique_ptr<Kernel> route_, route_bf16_, moe_f32_, moe_bf16_, join_, kvstore_, conv_add_norm_, conv_norm_;
    std::unique_ptr<Kernel> qact_, moe_i8_, moe_q4_;
};

}  // namespace inkling::vulkan
