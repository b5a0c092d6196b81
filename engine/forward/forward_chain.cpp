// The forward's side of the Vulkan chain (engine/vulkan/chain.h): which layers go to the
// device and what a lost device leaves. The chain is a Backend: the same layer sequence
// (run_layers) drives it.
#include <utility>

#include "engine/forward/forward.h"
#include "engine/vulkan/chain.h"

namespace inkling::forward {

Forward::~Forward() = default;

void Forward::set_chain(std::unique_ptr<vulkan::Chain> chain, bool prompts_only) {
    chain_ = std::move(chain);
    chain_prompts_only_ = prompts_only;
    if (chain_) chain_->set_host_pool(&meter_.pool());
}

std::string Forward::take_device_event() { return std::exchange(device_event_, std::string()); }

int Forward::run_chain(const std::vector<Span>& spans, std::int64_t R, std::vector<float>& x,
                       const std::vector<std::int64_t>& out_rows, std::vector<float>& logits) {
    chain_->begin(spans, R, x.data());
    const int n = chain_->layers();
    run_layers(*chain_, 0, n, R);
    int first_cpu = n;
    if (chain_->has_head()) {
        logits.assign(out_rows.size() * static_cast<std::size_t>(c_.unpadded_vocab), 0.0f);
        chain_->head(out_rows, logits.data());
        first_cpu = -1;
    } else {
        chain_->hand_off(x.data());
    }
    // The experts resident layers picked on the device join the usage counts.
    for (const auto& r : chain_->routes()) experts_.record(r.layer, r.experts);
    return first_cpu;
}

}  // namespace inkling::forward
