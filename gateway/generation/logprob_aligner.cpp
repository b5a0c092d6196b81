#include "gateway/generation/logprob_aligner.h"

#include <algorithm>

namespace inkling::gateway {

void LogprobAligner::add(TokenLogprob entry, bool marker) {
    items_.push_back({std::move(entry), marker ? State::Other : State::Waiting, 0, 0});
}

void LogprobAligner::produced(std::size_t content, bool other) {
    if (content == 0 && !other) return;
    const std::size_t begin = produced_, end = produced_ + content;
    std::size_t at = begin;
    for (auto& it : items_) {
        if (it.state != State::Waiting) continue;
        if (content == 0) {
            it.state = State::Other;
            continue;
        }
        it.state = State::Answer;
        it.start = std::min(at, end);
        at += it.entry.bytes.size();
        it.end = end;
    }
    produced_ = end;
}

std::vector<TokenLogprob> LogprobAligner::passed(std::string_view text) {
    passed_ += text;
    std::vector<TokenLogprob> ready;
    while (!items_.empty()) {
        Item& it = items_.front();
        if (it.state == State::Other) {
            items_.pop_front();
            continue;
        }
        if (it.state == State::Waiting || it.end > passed_.size()) break;
        for (; counted_bytes_ < it.start && counted_bytes_ < passed_.size(); ++counted_bytes_)
            if ((static_cast<unsigned char>(passed_[counted_bytes_]) & 0xC0) != 0x80) ++counted_points_;
        it.entry.text_offset = counted_points_;
        ready.push_back(std::move(it.entry));
        items_.pop_front();
    }
    return ready;
}

}  // namespace inkling::gateway
