#include "engine/eval/perplexity.h"

#include "engine/sampling/sampler.h"

#include <algorithm>
#include <stdexcept>

namespace inkling::eval {

Score score(forward::Forward& fw, std::span<const std::int32_t> ids, std::int64_t window, std::int64_t chunk) {
    if (window < 2) throw std::runtime_error("the scoring window must hold at least 2 tokens");
    const auto& c = fw.model().config;
    const std::int64_t U = c.unpadded_vocab, N = static_cast<std::int64_t>(ids.size());
    Score s;
    for (std::int64_t start = 0; start + 1 < N; start += window) {
        const std::int64_t len = std::min(window, N - start);
        if (len < 2) break;
        auto state = forward::make_session(c, len);
        for (std::int64_t at = 0; at < len; at += chunk) {
            const std::int64_t n = std::min(chunk, len - at);
            auto logits = fw.step(state, ids.subspan(static_cast<std::size_t>(start + at), static_cast<std::size_t>(n)),
                                  nullptr, true);
            for (std::int64_t r = 0; r < n; ++r) {
                const std::int64_t pos = at + r;  // this row predicts the token at pos + 1
                if (pos + 1 >= len) break;
                const float* row = logits.data() + r * U;
                const std::int32_t next = ids[static_cast<std::size_t>(start + pos + 1)];
                s.nll += sampling::log_sum_exp(std::span(row, static_cast<std::size_t>(U))) - row[next];
                ++s.tokens;
            }
        }
    }
    return s;
}

}  // namespace inkling::eval
