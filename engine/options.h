// Every flag, positional argument and environment variable of build/inkling, declared
// once (protocol/cli/option.h): engine/main.cpp parses and reads through this table,
// docs/configuration.md is generated from it.
#pragma once

#include "protocol/cli/option.h"

namespace inkling::engine {

const cli::Program& program();

}  // namespace inkling::engine
