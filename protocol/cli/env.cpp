#include "protocol/cli/env.h"

#include <cstdlib>
#include <stdexcept>

namespace inkling::cli {

std::optional<std::string> env(const Program& p, std::string_view name, std::string_view command) {
    if (!find(p, Kind::Env, name))
        throw std::logic_error(std::string(p.name) + " reads " + std::string(name) + " without declaring it");
    if (!find(p, Kind::Env, name, command)) return std::nullopt;
    const char* v = std::getenv(std::string(name).c_str());
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

}  // namespace inkling::cli
