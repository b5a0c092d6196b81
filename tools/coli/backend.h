// What a chat turn needs from wherever the model runs: a gateway over HTTP (attach mode)
// or a private engine child over the wire protocol. The chat loop (chat.cpp) only sees
// this interface.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "protocol/tml_render.h"

namespace coli {

struct TurnSettings {
    double effort = 0.0;       // TMLv0 thinking effort
    double temperature = 0.7;
    double top_p = 1.0;
    int max_tokens = 1024;
};

struct TurnResult {
    std::string content, reasoning;
    long completion_tokens = 0, prompt_tokens = 0;
    double seconds = 0, ttft_seconds = 0;
    double cache_hit_pct = -1;     // -1: not reported
    long reused_tokens = -1;
    bool stopped = false;          // interrupted by the user
    bool length_limited = false;
    std::string error;             // non-empty: the turn failed
};

struct Output {
    std::function<void(const std::string&)> content;    // text as it streams
    std::function<void(const std::string&)> reasoning;  // thinking as it streams
};

// An audio clip for the next user message: the WAV bytes and its DMel frames.
struct Clip {
    std::string wav;
    std::vector<std::uint8_t> dmel;
    std::size_t frames = 0;
    std::string name;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string describe() const = 0;
    // One assistant turn for `history` (its last message is the new user message, which
    // may carry one audio part per clip in `clips`). `interrupted` is polled every 50-100
    // ms: once it says true the backend stops the answer (STOP, or closes the stream).
    virtual TurnResult turn(const std::vector<inkling::protocol::tml::Message>& history, const std::vector<Clip>& clips,
                            const TurnSettings& settings, const Output& out,
                            const std::function<bool()>& interrupted) = 0;
    virtual std::string stats() = 0;  // one human-readable block
};

}  // namespace coli
