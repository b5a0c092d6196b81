#include "protocol/cli/sibling.h"

#include <filesystem>

#include "platform/process.h"

namespace inkling::cli {

// The sibling has this program's extension: none on Linux, ".exe" on Windows.
std::string sibling_path(std::string_view name) {
    const auto self = platform::executable_path();
    if (self.empty()) return std::string(name);
    return (self.parent_path() / (std::string(name) + self.extension().string())).string();
}

}  // namespace inkling::cli
