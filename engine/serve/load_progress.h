// Load progress before READY (`inkling serve --load-events`): an EVENT frame
//   {"kind":"load_progress","stage":"device","done":12,"total":48}
// on stdout each time the load moves on, so a supervisor can tell a long load from a hung
// one (the gateway's start-up deadline resets on each; PROTOCOL.md §4). Only real progress
// is reported (a stage begun, a layer uploaded), never a timer: a heartbeat would keep a
// hung load looking alive. Without --load-events nothing is written and READY stays the
// first bytes on stdout.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/frame_writer.h"

namespace inkling::serve {

class LoadProgress {
public:
    LoadProgress(bool enabled, int fd);
    // `stage` began (done = total = 0), or `done` of its `total` steps are finished. Within a
    // stage at most one frame per 100 ms goes out, and always the last step's.
    void report(std::string_view stage, std::uint64_t done = 0, std::uint64_t total = 0);
    std::uint64_t frames() const { return frames_; }

private:
    bool enabled_;
    protocol::FrameWriter writer_;
    std::string stage_;
    std::chrono::steady_clock::time_point last_{};
    std::uint64_t frames_ = 0;
};

}  // namespace inkling::serve
