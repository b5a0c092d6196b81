#include "gateway/dialect.h"

namespace inkling::gateway {

void Answer::add(Channel channel, std::string_view text) {
    if (text.empty()) return;
    if (blocks.empty() || blocks.back().channel != channel) blocks.push_back({channel, {}});
    blocks.back().text += text;
}

std::string Answer::text(Channel channel) const {
    std::string all;
    for (const auto& b : blocks)
        if (b.channel == channel) all += b.text;
    return all;
}

}  // namespace inkling::gateway
