// Feeds arbitrary bytes to both directions' readers, split at a point the input chooses,
// and checks the reader's promises: it never crashes, never stalls mid-way after finish(),
// and every frame it yields re-encodes to bytes it reads back as the same frame.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/frame_encode.h"
#include "protocol/frame_reader.h"

namespace proto = inkling::protocol;

static void check_direction(proto::Direction dir, std::string_view bytes, std::size_t split) {
    proto::Limits limits;
    limits.max_prompt_bytes = 1 << 12;  // keep fuzzing memory small
    limits.max_extension_bytes = 1 << 12;
    proto::FrameReader reader(dir, limits);
    reader.feed(bytes.substr(0, split));
    reader.feed(bytes.substr(split));
    reader.finish();
    if (reader.mid_frame()) std::abort();
    while (auto item = reader.next()) {
        auto* frame = std::get_if<proto::Frame>(&*item);
        if (!frame) continue;
        std::string wire = proto::encode(*frame);
        proto::FrameReader again(dir, limits);
        again.feed(wire);
        again.finish();
        auto back = again.next();
        if (!back || !std::holds_alternative<proto::Frame>(*back)) std::abort();
        // NaN log-probs compare unequal to themselves; compare the bytes instead.
        if (proto::encode(std::get<proto::Frame>(*back)) != wire) std::abort();
        if (again.next()) std::abort();
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::size_t split = data[0] % size;
    std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
    check_direction(proto::Direction::ToEngine, bytes, split % (bytes.size() + 1));
    check_direction(proto::Direction::FromEngine, bytes, split % (bytes.size() + 1));
    return 0;
}
