#include "engine/serve/load_progress.h"

#include <nlohmann/json.hpp>

namespace inkling::serve {

LoadProgress::LoadProgress(bool enabled, int fd) : enabled_(enabled), writer_(fd) {}

void LoadProgress::report(std::string_view stage, std::uint64_t done, std::uint64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    const bool new_stage = stage != stage_;
    const bool last_step = total > 0 && done >= total;
    if (!new_stage && !last_step && now - last_ < std::chrono::milliseconds(100)) return;
    stage_ = stage;
    last_ = now;
    nlohmann::json j = {{"kind", "load_progress"}, {"stage", stage}};
    if (total > 0) {
        j["done"] = done;
        j["total"] = total;
    }
    writer_.write(protocol::Event{j.dump()});
    ++frames_;
}

}  // namespace inkling::serve
