// Where the engine tests find the tiny checkpoints (written into the build folder by
// tools/make-tiny/ensure.sh before the tests run) and the committed reference goldens.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace test_paths {

inline std::filesystem::path fixtures() { return INKLING_FIXTURE_DIR; }
inline std::filesystem::path goldens() { return std::filesystem::path(INKLING_SOURCE_DIR) / "tests/fixtures/golden"; }

inline nlohmann::json golden(const std::string& name) {
    std::ifstream in(goldens() / (name + ".json"));
    return nlohmann::json::parse(in);
}

inline std::vector<std::string> golden_names() {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(goldens()))
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace test_paths
