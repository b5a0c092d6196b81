#include "gateway/generation/stop_filter.h"

#include <algorithm>

namespace inkling::gateway {

StopFilter::Out StopFilter::feed(const std::string& piece) {
    Out out;
    if (stopped_) return out;
    held_ += piece;
    // The earliest complete match wins; everything before it goes out.
    std::size_t first = std::string::npos;
    for (const auto& s : stops_) {
        auto at = held_.find(s);
        if (at == std::string::npos) continue;
        if (at < first || (at == first && s.size() < matched_.size())) matched_ = s;
        first = std::min(first, at);
    }
    if (first != std::string::npos) {
        out.text = held_.substr(0, first);
        held_.clear();
        out.stopped = stopped_ = true;
        return out;
    }
    // Hold back the longest tail that is a proper prefix of some stop sequence.
    std::size_t keep = 0;
    for (const auto& s : stops_)
        for (std::size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
    out.text = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

StopFilter::Out StopFilter::flush() {
    Out out;
    if (!stopped_) out.text = std::move(held_);
    held_.clear();
    return out;
}

}  // namespace inkling::gateway
