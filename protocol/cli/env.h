// The environment variables a binary reads, each declared in its options.cpp
// (protocol/cli/option.h, kind Env): the only getenv of the four binaries, so that
// docs/configuration.md lists every variable and device code reads none.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "protocol/cli/option.h"

namespace inkling::cli {

// The value of the variable `name` declared by `p`; nullopt when unset or empty, or when
// `command` is not one it is declared for. Throws std::logic_error for a name `p` does not
// declare at all (a programming error, caught by any test that reaches the read).
std::optional<std::string> env(const Program& p, std::string_view name, std::string_view command = {});

}  // namespace inkling::cli
