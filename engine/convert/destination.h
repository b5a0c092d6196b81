// The checks on DST made before anything is written, and the clean-up after a failure.
// DST may be new, empty, or a directory this converter wrote (it holds only converter
// files, the engine's expert-usage.json, and a marker: convert-report.json or
// experts.inkx.state); anything else is refused, so a mistyped path never overwrites
// someone's checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/convert/options.h"
#include "engine/convert/resume_state.h"

namespace inkling::convert {

struct Destination {
    bool exists = false;
    bool clear = false;                // --restart over an earlier conversion: remove its files first
    std::optional<ResumeState> resume; // an interrupted run of the same command to continue
};

// Throws std::runtime_error with the reason DST cannot be used.
Destination inspect_destination(const Options& o, const nlohmann::json& source_fingerprint);

// Throws when the file system holding DST has less than `needed` bytes free for us,
// naming both figures.
void check_free_space(const std::filesystem::path& dst, std::int64_t needed);

// Whether `name` is a file this converter writes (outputs, their .partial, the state).
bool is_converter_file(const std::string& name);
// Removes every converter file in `dst` (nothing else).
void remove_converter_files(const std::filesystem::path& dst);

}  // namespace inkling::convert
