// Every flag and positional argument of build/coli, declared once (protocol/cli/option.h):
// tools/coli/main.cpp parses and reads through this table, docs/configuration.md is
// generated from it. `coli serve` passes its arguments on to inkling-gateway unread.
#pragma once

#include "protocol/cli/option.h"

namespace coli {

const inkling::cli::Program& program();

}  // namespace coli
