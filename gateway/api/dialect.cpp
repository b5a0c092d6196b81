#include "gateway/api/dialect.h"

#include <stdexcept>

namespace inkling::gateway {

void Answer::add(Channel channel, std::string_view text) {
    if (text.empty()) return;
    if (blocks.empty() || blocks.back().call || blocks.back().channel != channel) blocks.push_back({channel, {}, {}});
    blocks.back().text += text;
}

std::string Answer::text(Channel channel) const {
    std::string all;
    for (const auto& b : blocks)
        if (!b.call && b.channel == channel) all += b.text;
    return all;
}

void Answer::add_call(std::size_t index, std::string name) {
    blocks.push_back({Channel::Content, {}, ToolCall{index, std::move(name), {}}});
}

void Answer::add_arguments(std::size_t index, std::string_view fragment) {
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
        if (it->call && it->call->index == index) {
            it->call->arguments += fragment;
            return;
        }
}

std::vector<ToolCall> Answer::calls() const {
    std::vector<ToolCall> all;
    for (const auto& b : blocks)
        if (b.call) all.push_back(*b.call);
    return all;
}

// A dialect that never lets tools be called never gets here (dialect.h).
std::string Formatter::stream_call_start(std::size_t, std::string_view) {
    throw std::logic_error("this API dialect does not stream tool calls");
}
std::string Formatter::stream_call_arguments(std::size_t, std::string_view) {
    throw std::logic_error("this API dialect does not stream tool calls");
}
std::string Formatter::stream_call_end(std::size_t) { throw std::logic_error("this API dialect does not stream tool calls"); }

}  // namespace inkling::gateway
