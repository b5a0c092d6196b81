#include "engine/vulkan/ops.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace inkling::vulkan {
namespace {

std::uint32_t groups_for(std::int64_t n, std::int64_t per) {
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>((n + per - 1) / per, 1, 65535));
}

// relattn's split path (docs/vulkan.md, "Decode attention"). relattn.comp gives each
// (row, head) one workgroup that walks all of its positions, one lane a position: a decode
// row's 8 to 32 heads are 8 to 32 workgroups on a GPU of 132 compute units, each lane
// waiting on one load after another. The split makes up to kSplitGroups workgroups in all
// (never more, so that a range of attn_part_floats_max holds any call of up to that many
// rows × heads), with chunks of kMinChunk positions at least; the figures on the H200
// (docs/vulkan.md) put the best chunking within 25 % of this rule's, 320 to 32768
// positions, and the split ahead of relattn.comp up to a prefill of kSplitJobs rows × heads
// (one chunk each: 2.3 against 9.9 ms for 128 rows × 32 heads at 4096), measured no further.
constexpr std::uint64_t kSplitGroups = 1024, kMinChunk = 32, kSplitJobs = 4096;

// relattn_split/merge's push constants: relattn's and the split.
struct SplitPush {
    AttnPush a;
    std::uint32_t chunk, chunks;
};

// The bytes a binding spans (none without a buffer).
std::size_t bytes_of(const Binding& b) {
    if (!b.buffer) return 0;
    return b.bytes != VK_WHOLE_SIZE ? b.bytes : b.buffer->size() - b.offset;
}

// Visible positions of the span's last row, the most of any of its rows.
std::uint64_t visible(const AttnPush& p) {
    const std::uint64_t pos = std::uint64_t{p.pos0} + p.rows - 1;
    const std::uint64_t from = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    return pos + 1 - std::max<std::uint64_t>(from, p.lo);
}

// A one-workgroup kernel's lanes: 1024, or the most the device allows (Vulkan promises 128),
// a power of two no smaller than `least`.
std::uint32_t wide_lanes(const Context& ctx, std::uint32_t least) {
    std::uint32_t lanes = least;
    while (lanes < 1024 && lanes * 2 <= ctx.info().max_workgroup_invocations) lanes *= 2;
    return lanes;
}

// gemm.comp's grid (a workgroup a tile of 64 outputs × 32 rows, no grid-stride loop) holds the product.
bool gemm_fits(const GemvPush& p) {
    return (std::int64_t{p.O} + 63) / 64 <= 65535 && (std::int64_t{p.S} + 31) / 32 <= 65535;
}

}  // namespace

Ops::Ops(Context& ctx)
    : gemm_f32_(std::make_unique<Kernel>(ctx, "gemm", 4, sizeof(GemvPush), std::vector<std::uint32_t>{0})),
      gemm_bf16_(std::make_unique<Kernel>(ctx, "gemm", 4, sizeof(GemvPush), std::vector<std::uint32_t>{1})),
      gemv_f32_(std::make_unique<Kernel>(ctx, "gemv", 4, sizeof(GemvPush), std::vector<std::uint32_t>{0})),
      gemv_bf16_(std::make_unique<Kernel>(ctx, "gemv", 4, sizeof(GemvPush), std::vector<std::uint32_t>{1})),
      rmsnorm_(std::make_unique<Kernel>(ctx, "rmsnorm", 4, sizeof(NormPush))),
      ew_(std::make_unique<Kernel>(ctx, "ew", 4, sizeof(EwPush))),
      sconv_(std::make_unique<Kernel>(ctx, "sconv", 3, sizeof(ConvPush))),
      attn_(std::make_unique<Kernel>(ctx, "relattn", 10, sizeof(AttnPush))),
      route_(std::make_unique<Kernel>(ctx, "moe_route", 7, sizeof(RoutePush),
                                      std::vector<std::uint32_t>{0, wide_lanes(ctx, 256)})),
      route_bf16_(std::make_unique<Kernel>(ctx, "moe_route", 7, sizeof(RoutePush),
                                           std::vector<std::uint32_t>{1, wide_lanes(ctx, 256)})),
      moe_f32_(std::make_unique<Kernel>(ctx, "moe_gemv", 6, sizeof(MoeGemvPush), std::vector<std::uint32_t>{0})),
      moe_bf16_(std::make_unique<Kernel>(ctx, "moe_gemv", 6, sizeof(MoeGemvPush), std::vector<std::uint32_t>{1})),
      join_(std::make_unique<Kernel>(ctx, "moe_join", 5, sizeof(JoinPush))),
      kvstore_(std::make_unique<Kernel>(ctx, "kvstore", 2, sizeof(KvStorePush))),
      conv_add_norm_(std::make_unique<Kernel>(ctx, "conv_add_norm", 10, sizeof(ConvAddNormPush),
                                              std::vector<std::uint32_t>{wide_lanes(ctx, 128)})),
      conv_norm_(std::make_unique<Kernel>(ctx, "conv_norm", 4, sizeof(ConvNormPush))) {
    for (std::uint32_t k = 0; k < 4; ++k) {
        const std::vector<std::uint32_t> nu{1u << k};
        attn_split_[k] = std::make_unique<Kernel>(ctx, "relattn_split", 9, sizeof(SplitPush), nu);
        attn_merge_[k] = std::make_unique<Kernel>(ctx, "relattn_merge", 3, sizeof(SplitPush), nu);
    }
    // The integer expert shaders round through double (shaderFloat64): without it there are none.
    if (!ctx.info().float64) return;
    qact_ = std::make_unique<Kernel>(ctx, "qact", 4, sizeof(QactPush));
    moe_i8_ = std::make_unique<Kernel>(ctx, "moe_gemv_int", 6, sizeof(MoeIntPush), std::vector<std::uint32_t>{0});
    moe_q4_ = std::make_unique<Kernel>(ctx, "moe_gemv_int", 6, sizeof(MoeIntPush), std::vector<std::uint32_t>{1});
}

Ops::~Ops() = default;

void Ops::gemv(Frame& f, bool bf16, const Buffer& w, const Buffer& x, const Buffer& y, const GemvPush& p,
               const Buffer* up) const {
    if (gemm_rows_ > 0 && p.S >= gemm_rows_ && gemm_fits(p)) return gemm(f, bf16, w, x, y, p, up);
    GemvPush q = p;
    q.swiglu = up ? 1u : 0u;
    const Binding b[] = {{&w}, {&x}, {&y}, {up ? up : &x}};  // without up the fourth is never read
    f.dispatch(bf16 ? *gemv_bf16_ : *gemv_f32_, b, &q, groups_for(q.O, 4));  // 4 rows a workgroup
}

void Ops::gemm(Frame& f, bool bf16, const Buffer& w, const Buffer& x, const Buffer& y, const GemvPush& p,
               const Buffer* up) const {
    GemvPush q = p;
    q.swiglu = up ? 1u : 0u;
    if (!gemm_fits(q))
        throw std::invalid_argument("gemm: " + std::to_string(q.O) + " x " + std::to_string(q.S) + " is past one grid");
    const Binding b[] = {{&w}, {&x}, {&y}, {up ? up : &x}};
    f.dispatch(bf16 ? *gemm_bf16_ : *gemm_f32_, b, &q, groups_for(q.O, 64), groups_for(q.S, 32));
}

void Ops::rmsnorm(Frame& f, const NormPush& p, const Buffer& x, const Buffer& weight, const Buffer& out) const {
    NormPush q = p;
    q.mode &= ~2u;  // nothing to add: the fourth binding is x again, never read
    const Binding b[] = {{&x}, {&weight}, {&out}, {&x}};
    f.dispatch(*rmsnorm_, b, &q, groups_for(q.segments, 1));
}

void Ops::add_rmsnorm(Frame& f, const NormPush& p, const Buffer& x, const Buffer& a, const Buffer& weight,
                      const Buffer& out) const {
    NormPush q = p;
    q.mode |= 2u;
    const Binding b[] = {{&x}, {&weight}, {&out}, {&a}};
    f.dispatch(*rmsnorm_, b, &q, groups_for(q.segments, 1));
}

void Ops::ew(Frame& f, EwOp op, const Buffer& a, const Buffer& b, std::uint32_t n, float scale) const {
    const EwPush p{static_cast<std::uint32_t>(op), n, 1, 0, scale};
    const Binding bind[] = {{&a}, {&b}, {&b}, {&b}};
    f.dispatch(*ew_, bind, &p, groups_for(n, 256));
}

bool Ops::swiglu_apart(Frame& f, const Buffer& gate, const Buffer& up, std::uint32_t n, bool apart) const {
    if (!apart || n == 0) return false;
    ew(f, EwOp::Swiglu, gate, up, n);
    f.barrier();
    return true;
}

void Ops::combine(Frame& f, const Buffer& a, const Buffer& routed, const Buffer& shared, const Buffer& weights,
                  std::uint32_t n, std::uint32_t width, std::uint32_t shared_n) const {
    const EwPush p{static_cast<std::uint32_t>(EwOp::Combine), n, width, shared_n, 1.0f};
    const Binding bind[] = {{&a}, {&routed}, {&shared}, {&weights}};
    f.dispatch(*ew_, bind, &p, groups_for(n, 256));
}

void Ops::sconv(Frame& f, const ConvPush& p, const Buffer& x, const Buffer& w, const Buffer& state) const {
    const Binding b[] = {{&x}, {&w}, {&state}};
    f.dispatch(*sconv_, b, &p, groups_for(p.channels, 64));
}

void Ops::relattn(Frame& f, const AttnPush& p, const AttnBuffers& b) const {
    const AttnSplit s = attn_split(p);
    relattn(f, p, b, s.chunks > 0 && attn_part_floats(p, s) * 4 <= bytes_of(b.part) ? s : AttnSplit{});
}

void Ops::relattn(Frame& f, const AttnPush& p, const AttnBuffers& b, const AttnSplit& s) const {
    if (s.chunks == 0) {
        const Binding bind[] = {{b.q}, {b.k_fresh}, {b.v_fresh}, {b.k_mirror}, {b.v_mirror},
                                {b.r}, {b.bank},    {b.out},     b.tau,        {b.host_part}};
        f.dispatch(*attn_, bind, &p, p.rows * p.H);
        return;
    }
    if (!b.part.buffer) throw std::invalid_argument("relattn: a split over positions needs a partials buffer");
    if (const std::size_t room = bytes_of(b.part); room < attn_part_floats(p, s) * 4)
        throw std::invalid_argument("relattn: the partials range holds " + std::to_string(room / 4) +
                                    " floats, the split needs " + std::to_string(attn_part_floats(p, s)));
    if (s.chunks > 65535)
        throw std::invalid_argument("relattn: " + std::to_string(s.chunks) + " chunks, past a grid's 65535");
    if (p.hd == 0 || p.hd > 256 || p.d_rel > 64)
        throw std::invalid_argument("relattn: the split takes head dims 1 to 256 and d_rel up to 64, not " +
                                    std::to_string(p.hd) + " and " + std::to_string(p.d_rel));
    std::uint32_t k = 0;  // the variant with 32·2^k ≥ hd dims a lane group
    while ((32u << k) < p.hd) ++k;
    const SplitPush sp{p, s.chunk, s.chunks};
    const Binding split[] = {{b.q}, {b.k_fresh}, {b.v_fresh}, {b.k_mirror}, {b.v_mirror},
                             {b.r}, {b.bank},    b.part,      b.tau};
    f.dispatch(*attn_split_[k], split, &sp, p.rows * p.H, s.chunks);
    f.barrier();
    const Binding merge[] = {b.part, {b.host_part}, {b.out}};
    f.dispatch(*attn_merge_[k], merge, &sp, p.rows * p.H);
}

AttnSplit Ops::attn_split(const AttnPush& p) {
    const std::uint64_t jobs = std::uint64_t{p.rows} * p.H;
    if (jobs == 0 || jobs > kSplitJobs || p.hd == 0 || p.hd > 256 || p.d_rel > 64) return {};
    const std::uint64_t most = std::max<std::uint64_t>(1, visible(p) / kMinChunk);
    const std::uint64_t chunks = std::min(std::max<std::uint64_t>(1, kSplitGroups / jobs), most);
    return attn_split(p, static_cast<std::uint32_t>((visible(p) + chunks - 1) / chunks));
}

AttnSplit Ops::attn_split(const AttnPush& p, std::uint32_t chunk) {
    if (p.rows == 0) return {};
    chunk = std::max<std::uint32_t>(chunk, 1);
    return {chunk, static_cast<std::uint32_t>((visible(p) + chunk - 1) / chunk)};
}

std::size_t Ops::attn_part_floats(const AttnPush& p) { return attn_part_floats(p, attn_split(p)); }

std::size_t Ops::attn_part_floats(const AttnPush& p, const AttnSplit& s) {
    return std::size_t{p.rows} * p.H * s.chunks * (std::size_t{p.hd} + 2);
}

std::size_t Ops::attn_part_floats_max(std::uint32_t hd) {
    // rows·H·chunks ≤ rows·H·⌊kSplitGroups / (rows·H)⌋ ≤ kSplitGroups while rows·H ≤ kSplitGroups.
    return kSplitGroups * (std::size_t{hd} + 2);
}

void Ops::conv_norm(Frame& f, const ConvNormPush& p, const Buffer& x, const Buffer& conv_w, const Buffer& state,
                    const Buffer& norm_w) const {
    const Binding b[] = {{&x}, {&conv_w}, {&state}, {&norm_w}};
    f.dispatch(*conv_norm_, b, &p, groups_for(p.channels / std::max<std::uint32_t>(p.hd, 1), 1));  // a workgroup a head
}

void Ops::conv_add_norm(Frame& f, const ConvAddNormPush& p, const Buffer& x, const Buffer& a, const Buffer& conv_w,
                        const Buffer& state, const Buffer& norm_w, const Buffer& h, const JoinInput* join) const {
    ConvAddNormPush q = p;
    q.K = join ? join->K : 0u;
    q.NS = join ? join->NS : 0u;
    q.n = join ? join->n : 0u;
    // Without a join its four bindings are a again, never read.
    const Binding b[] = {{&x},      {&a}, {&conv_w},
                         {&state},  {&norm_w}, {&h},
                         {join ? join->y : &a}, {join ? join->route_w : &a}, {join ? join->shared : &a},
                         {join ? join->shared_w : &a}};
    f.dispatch(*conv_add_norm_, b, &q, 1);  // the row's one workgroup
}

void Ops::kvstore(Frame& f, const KvStorePush& p, const Buffer& fresh, const Buffer& ring) const {
    const Binding b[] = {{&fresh}, {&ring}};
    f.dispatch(*kvstore_, b, &p, groups_for(static_cast<std::int64_t>(std::min(p.rows, p.mrows)) * p.KV * p.hd, 256));
}

void Ops::moe_route(Frame& f, const RoutePush& p, const Binding& logits, const Buffer& bias, const Binding& route_e,
                    const Buffer& route_w, const Buffer& shared_w) const {
    RoutePush q = p;
    q.D = 0;
    const Binding b[] = {logits, {&bias}, route_e, {&route_w}, {&shared_w}, logits, logits};  // the last two unread
    f.dispatch(*route_, b, &q, q.R);  // one workgroup a row
}

void Ops::moe_router_route(Frame& f, const RoutePush& p, bool bf16, const Buffer& router, std::uint32_t D,
                           const Buffer& h, const Buffer& bias, const Binding& route_e, const Buffer& route_w,
                           const Buffer& shared_w) const {
    if (!router_fits(p.E, p.NS, D, bf16)) throw std::invalid_argument("moe_router_route: the router does not fit one workgroup");
    RoutePush q = p;
    q.D = D;
    const Binding b[] = {{&h}, {&bias}, route_e, {&route_w}, {&shared_w}, {&router}, {&h}};
    f.dispatch(bf16 ? *route_bf16_ : *route_, b, &q, q.R);
}

bool Ops::router_fits(std::uint32_t experts, std::uint32_t shared, std::uint32_t D, bool bf16) {
    // 16-byte rows (the shader's loads), logits in its shared memory, and a matrix of at most
    // 256 KiB: one workgroup streams that in about the time a dispatch and a barrier take.
    const std::uint64_t bytes = std::uint64_t{experts + shared} * D * (bf16 ? 2 : 4);
    return D % 8 == 0 && experts <= 1024 && shared <= 16 && bytes <= (256u << 10);
}

void Ops::moe_gemv(Frame& f, bool bf16, const MoeGemvPush& p, const Buffer& w, const Buffer& x, const Buffer& y,
                   const Binding& route_e, const Buffer& slots, const Buffer* up) const {
    MoeGemvPush q = p;
    q.swiglu = up ? 1u : 0u;
    const Binding b[] = {{&w}, {&x}, {&y}, route_e, {&slots}, {up ? up : &x}};
    f.dispatch(bf16 ? *moe_bf16_ : *moe_f32_, b, &q, groups_for(q.O, 4), q.pairs);
}

void Ops::qact(Frame& f, const QactPush& p, const Buffer& x, const Buffer& q, const Buffer& scales,
               const Buffer* up) const {
    QactPush push = p;
    push.swiglu = up ? 1u : 0u;
    const Binding b[] = {{&x}, {&q}, {&scales}, {up ? up : &x}};
    f.dispatch(*qact_, b, &push, groups_for(static_cast<std::int64_t>(push.rows) * push.blocks, 64));  // a block an invocation
}

void Ops::moe_gemv_int(Frame& f, bool int4, const MoeIntPush& p, const Buffer& w, const Buffer& xq, const Buffer& xs,
                       const Buffer& y, const Binding& route_e, const Buffer& slots) const {
    const Binding b[] = {{&w}, {&xq}, {&xs}, {&y}, route_e, {&slots}};
    f.dispatch(int4 ? *moe_q4_ : *moe_i8_, b, &p, groups_for(p.O, 8), p.pairs);  // 8 rows a workgroup
}

void Ops::moe_join(Frame& f, const JoinPush& p, const Buffer& a, const Buffer& y, const Buffer& route_w,
                   const Buffer& shared, const Buffer& shared_w) const {
    const Binding b[] = {{&a}, {&y}, {&route_w}, {&shared}, {&shared_w}};
    f.dispatch(*join_, b, &p, groups_for(p.n, 256));
}

}  // namespace inkling::vulkan
