#include "engine/convert/resume_state.h"


#include <fstream>
#include <stdexcept>

#include "engine/convert/output_file.h"

namespace inkling::convert {

std::filesystem::path ResumeState::path(const std::filesystem::path& dst) { return dst / "experts.inkx.state"; }

std::optional<ResumeState> ResumeState::load(const std::filesystem::path& dst) {
    const auto p = path(dst);
    if (!std::filesystem::exists(p)) return std::nullopt;
    std::ifstream in(p);
    try {
        const auto j = nlohmann::json::parse(in);
        ResumeState s;
        s.options = j.at("options");
        s.source = j.at("source");
        s.crcs = j.at("crcs").get<std::vector<std::uint32_t>>();
        s.errors = j.at("errors");
        return s;
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(p.string() + ": unreadable resume state (" + e.what() +
                                 "); pass --restart to start over");
    }
}

void ResumeState::save(const std::filesystem::path& dst) const {
    const nlohmann::json j = {
        {"records_done", crcs.size()}, {"options", options}, {"source", source}, {"crcs", crcs}, {"errors", errors}};
    // The state is a note to a later run, not an output: written through .partial like the
    // outputs, so a kill mid-save leaves the previous state whole.
    write_file_atomically(path(dst), j.dump());
}

nlohmann::json source_fingerprint(const std::filesystem::path& src) {
    nlohmann::json files = nlohmann::json::array();
    std::vector<std::filesystem::path> names;
    for (const auto& e : std::filesystem::directory_iterator(src))
        if (e.is_regular_file()) names.push_back(e.path());
    std::sort(names.begin(), names.end());
    for (const auto& p : names) {
        std::error_code size_error, time_error;
        const auto bytes = std::filesystem::file_size(p, size_error);
        const auto mtime = std::filesystem::last_write_time(p, time_error);
        if (size_error || time_error) continue;
        // Nanoseconds since the Unix epoch (st_mtim on Linux), on any platform's file clock.
        const auto since_epoch = std::chrono::file_clock::to_sys(mtime).time_since_epoch();
        files.push_back({{"name", p.filename().string()},
                         {"bytes", static_cast<std::int64_t>(bytes)},
                         {"mtime_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count()}});
    }
    return files;
}

}  // namespace inkling::convert
