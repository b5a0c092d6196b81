#include "protocol/cli/sibling.h"

#include <filesystem>

namespace inkling::cli {

std::string sibling_path(std::string_view name) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(name) : (self.parent_path() / name).string();
}

}  // namespace inkling::cli
