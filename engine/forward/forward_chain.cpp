// The forward's side of the Vulkan chain (engine/vulkan/chain.h): which layers go to the
// device, the host's routed experts between the frames, and what a lost device leaves.
#include <utility>

#include "engine/forward/forward.h"
#include "engine/vulkan/chain.h"

namespace inkling::forward {

Forward::~Forward() = default;

void Forward::set_chain(std::unique_ptr<vulkan::Chain> chain, bool prompts_only) {
    chain_ = std::move(chain);
    chain_prompts_only_ = prompts_only;
    if (chain_) chain_->set_host_pool(&pool_);
}

std::string Forward::take_device_event() { return std::exchange(device_event_, std::string()); }

int Forward::run_chain(const std::vector<Span>& spans, std::int64_t R, std::vector<float>& x,
                       const std::vector<std::int64_t>& out_rows, std::vector<float>& logits) {
    const std::int64_t D = c_.hidden, E = c_.experts, NS = c_.shared_experts;
    std::vector<vulkan::Chain::Span> cs;
    for (const Span& sp : spans) cs.push_back({sp.state, sp.first, sp.rows, sp.pos0});
    chain_->begin(cs, R, x.data());
    std::vector<float> h(static_cast<std::size_t>(R * D)), routed(h.size()),
        router(static_cast<std::size_t>(R * (E + NS))), shared_w;
    const int n = chain_->layers();
    for (int i = 0; i < n; ++i) {
        if (!chain_->layer(i, h.data(), router.data())) continue;
        // The routed experts on the host while the device runs the shared ones.
        chain_->start_shared(i);
        moe(i, R, h.data(), routed.data(), router.data(), &shared_w);
        chain_->join_routed(i, routed.data(), shared_w.data());
    }
    if (chain_->full()) {
        logits.assign(out_rows.size() * static_cast<std::size_t>(c_.unpadded_vocab), 0.0f);
        chain_->finish(out_rows, logits.data(), nullptr);
        return -1;
    }
    chain_->finish(out_rows, nullptr, x.data());
    return n;
}

}  // namespace inkling::forward
