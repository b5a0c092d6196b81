// docs/configuration.md from the binaries' declarations (protocol/cli/option.h): one
// table of flags and positionals per binary, one of environment variables, one of fault
// hooks. tools/options-doc prints it; the options-doc suite of `make test` compares it
// with the committed file row by row.
#pragma once

#include <span>
#include <string>

#include "protocol/cli/option.h"

namespace inkling::cli {

std::string configuration_markdown(std::span<const Program* const> programs);

}  // namespace inkling::cli
