// Every flag and positional argument of build/inkling-dmel, declared once
// (protocol/cli/option.h): tools/dmel/main.cpp parses through this table,
// docs/configuration.md is generated from it.
#pragma once

#include "protocol/cli/option.h"

namespace inkling::dmel {

const cli::Program& program();

}  // namespace inkling::dmel
