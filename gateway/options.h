// Every flag and environment variable of build/inkling-gateway, declared once
// (protocol/cli/option.h): gateway/main.cpp parses and reads through this table,
// docs/configuration.md is generated from it.
#pragma once

#include "protocol/cli/option.h"

namespace inkling::gateway {

const cli::Program& program();

}  // namespace inkling::gateway
