// What lets an interrupted conversion continue: DST/experts.inkx.state, a small JSON file
// saved (atomically) about once a second while experts.inkx.partial grows. It names the
// options and the source (file names, sizes, mtimes) it belongs to, the CRC of every
// record finished, and the quantization-error sums up to there. A rerun with the same
// command checks all of it against the partial file and continues after the last good
// record; anything else is refused (or, with --restart, discarded).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace inkling::convert {

struct ResumeState {
    nlohmann::json options;  // Options::output_options()
    nlohmann::json source;   // source_fingerprint()
    std::vector<std::uint32_t> crcs;  // one per finished record, in order
    nlohmann::json errors;   // QuantError::to_json() as of crcs.size() records

    static std::filesystem::path path(const std::filesystem::path& dst);
    // Throws std::runtime_error when the file exists but cannot be read.
    static std::optional<ResumeState> load(const std::filesystem::path& dst);
    void save(const std::filesystem::path& dst) const;  // write-then-rename
};

// Every regular file of `src` with its size and modification time, by name.
nlohmann::json source_fingerprint(const std::filesystem::path& src);

}  // namespace inkling::convert
