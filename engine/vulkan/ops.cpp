#include "engine/vulkan/ops.h"

#include <algorithm>
#include <vector>

namespace inkling::vulkan {
namespace {

std::uint32_t groups_for(std::int64_t n, std::int64_t per) {
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>((n + per - 1) / per, 1, 65535));
}

}  // namespace

Ops::Ops(Context& ctx)
    : gemv_f32_(std::make_unique<Kernel>(ctx, "gemv", 3, sizeof(GemvPush), std::vector<std::uint32_t>{0})),
      gemv_bf16_(std::make_unique<Kernel>(ctx, "gemv", 3, sizeof(GemvPush), std::vector<std::uint32_t>{1})),
      rmsnorm_(std::make_unique<Kernel>(ctx, "rmsnorm", 3, sizeof(NormPush))),
      ew_(std::make_unique<Kernel>(ctx, "ew", 4, sizeof(EwPush))),
      sconv_(std::make_unique<Kernel>(ctx, "sconv", 3, sizeof(ConvPush))),
      attn_(std::make_unique<Kernel>(ctx, "relattn", 10, sizeof(AttnPush))),
      route_(std::make_unique<Kernel>(ctx, "moe_route", 5, sizeof(RoutePush))),
      moe_f32_(std::make_unique<Kernel>(ctx, "moe_gemv", 5, sizeof(MoeGemvPush), std::vector<std::uint32_t>{0})),
      moe_bf16_(std::make_unique<Kernel>(ctx, "moe_gemv", 5, sizeof(MoeGemvPush), std::vector<std::uint32_t>{1})),
      join_(std::make_unique<Kernel>(ctx, "moe_join", 5, sizeof(JoinPush))),
      kvstore_(std::make_unique<Kernel>(ctx, "kvstore", 2, sizeof(KvStorePush))) {
    // The integer expert shaders round through double (shaderFloat64): without it there are none.
    if (!ctx.info().float64) return;
    qact_ = std::make_unique<Kernel>(ctx, "qact", 3, sizeof(QactPush));
    moe_i8_ = std::make_unique<Kernel>(ctx, "moe_gemv_int", 6, sizeof(MoeIntPush), std::vector<std::uint32_t>{0});
    moe_q4_ = std::make_unique<Kernel>(ctx, "moe_gemv_int", 6, sizeof(MoeIntPush), std::vector<std::uint32_t>{1});
}

Ops::~Ops() = default;

void Ops::gemv(Frame& f, bool bf16, const Buffer& w, const Buffer& x, const Buffer& y, const GemvPush& p) const {
    const Binding b[] = {{&w}, {&x}, {&y}};
    f.dispatch(bf16 ? *gemv_bf16_ : *gemv_f32_, b, &p, groups_for(p.O, 4));  // 4 rows a workgroup
}

void Ops::rmsnorm(Frame& f, const NormPush& p, const Buffer& x, const Buffer& weight, const Buffer& out) const {
    const Binding b[] = {{&x}, {&weight}, {&out}};
    f.dispatch(*rmsnorm_, b, &p, groups_for(p.segments, 1));
}

void Ops::ew(Frame& f, EwOp op, const Buffer& a, const Buffer& b, std::uint32_t n, float scale) const {
    const EwPush p{static_cast<std::uint32_t>(op), n, 1, 0, scale};
    const Binding bind[] = {{&a}, {&b}, {&b}, {&b}};
    f.dispatch(*ew_, bind, &p, groups_for(n, 256));
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
    const Binding bind[] = {{b.q}, {b.k_fresh}, {b.v_fresh}, {b.k_mirror}, {b.v_mirror},
                            {b.r}, {b.bank},    {b.out},     b.tau,        {b.host_part}};
    f.dispatch(*attn_, bind, &p, p.rows * p.H);
}

void Ops::kvstore(Frame& f, const KvStorePush& p, const Buffer& fresh, const Buffer& ring) const {
    const Binding b[] = {{&fresh}, {&ring}};
    f.dispatch(*kvstore_, b, &p, groups_for(static_cast<std::int64_t>(std::min(p.rows, p.mrows)) * p.KV * p.hd, 256));
}

void Ops::moe_route(Frame& f, const RoutePush& p, const Binding& logits, const Buffer& bias, const Binding& route_e,
                    const Buffer& route_w, const Buffer& shared_w) const {
    const Binding b[] = {logits, {&bias}, route_e, {&route_w}, {&shared_w}};
    f.dispatch(*route_, b, &p, p.R);  // one workgroup a row
}

void Ops::moe_gemv(Frame& f, bool bf16, const MoeGemvPush& p, const Buffer& w, const Buffer& x, const Buffer& y,
                   const Binding& route_e, const Buffer& slots) const {
    const Binding b[] = {{&w}, {&x}, {&y}, route_e, {&slots}};
    f.dispatch(bf16 ? *moe_bf16_ : *moe_f32_, b, &p, groups_for(p.O, 4), p.pairs);
}

void Ops::qact(Frame& f, const QactPush& p, const Buffer& x, const Buffer& q, const Buffer& scales) const {
    const Binding b[] = {{&x}, {&q}, {&scales}};
    f.dispatch(*qact_, b, &p, groups_for(static_cast<std::int64_t>(p.rows) * p.blocks, 64));  // a block an invocation
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
