// The path of another binary in the folder of the running one (build/inkling beside
// build/inkling-gateway; inkling.exe beside coli.exe on Windows), read from /proc/self/exe
// (GetModuleFileNameW); just `name` when that cannot be read,
// so that PATH finds it.
#pragma once

#include <string>
#include <string_view>

namespace inkling::cli {

std::string sibling_path(std::string_view name);

}  // namespace inkling::cli
