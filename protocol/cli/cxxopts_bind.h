// The declarations of protocol/cli/option.h as cxxopts sees them: one table per command,
// a check that every given argument belongs to the command, and the --help text.
//
//   cxxopts::Options options("inkling");
//   cli::add_options(options, program, {"run", "serve"});  // the union, each name once
//   auto args = options.parse(argc, argv);
//   cli::check_applies(args, program, args["command"].as<std::string>());
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "protocol/cli/cxxopts.h"

#include "protocol/cli/option.h"

namespace inkling::cli {

// Registers the flags and positionals of `p` that apply to any of `commands` (empty:
// every one), each name once (the first declaration wins), positionals in declared
// order. A default_sibling default is resolved here, beside the running binary.
void add_options(cxxopts::Options& options, const Program& p, std::initializer_list<std::string_view> commands = {});

// Throws cxxopts::exceptions::exception (a usage error, exit status 2 in every main) for
// a flag or positional that `command` has no declaration for, or a stray argument.
void check_applies(const cxxopts::ParseResult& args, const Program& p, std::string_view command);

// The --help text for `commands` (empty: every one): the summary, the usage lines (of
// that command alone when there is one), the flags.
std::string help(const Program& p, std::initializer_list<std::string_view> commands = {});

}  // namespace inkling::cli
