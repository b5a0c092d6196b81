// Command-line declarations: every flag, positional argument and environment variable of
// a binary, written once in that binary's options.cpp (engine/, gateway/, tools/coli/,
// tools/dmel/). main.cpp registers them into cxxopts per command (cxxopts_bind.h) and
// reads environment variables only through env.h; tools/options-doc renders them as
// docs/configuration.md, which `make test` compares with the committed file.
//
// Why protocol/: it is the one library all four binaries link (what they share has one
// implementation there, like audio/), and the doc tool needs the four tables side by side
// without linking the engine or the gateway.
//
//   constexpr cli::Option kOptions[] = {
//       {.name = "model", .value_name = "DIR", .doc = "model directory", .commands = "run, serve"},
//       {.name = "json", .type = cli::Type::Bool, .default_value = "false", .doc = "one JSON object",
//        .commands = "run"},
//       {.kind = cli::Kind::Env, .name = "INKLING_API_KEY", .doc = "the key", .flag_of = "api-key"},
//   };
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inkling::cli {

enum class Kind { Flag, Positional, Env };

// The C++ type cxxopts parses the value into; main.cpp's as<T>() names the same one:
// Int int, Unsigned unsigned, Int64 std::int64_t, UInt64 std::uint64_t, Size std::size_t,
// Port unsigned short, Double double, String std::string, Strings a repeatable
// std::vector<std::string>.
enum class Type { Bool, Int, Unsigned, Int64, UInt64, Size, Port, Double, String, Strings };

struct Option {
    Kind kind = Kind::Flag;
    // A flag without "--" (kebab-case; one letter is a short flag such as -n), a
    // positional's key (args["paths"]), or an environment variable (UPPER_CASE).
    std::string_view name{};
    char short_name = 0;  // a long flag's one-letter alias: 'h' for --help
    Type type = Type::String;
    std::string_view value_name{};     // what help and doc write after the flag (N, DIR); none for Bool
    std::string_view default_value{};  // as cxxopts parses it; empty: absent unless given
    // The binary of this name in the folder of the running one is the default (an engine
    // beside the gateway): a value known only at run time, documented as such.
    std::string_view default_sibling{};
    std::string_view default_doc{};  // the doc's "default" cell where default_value cannot say it
    std::string_view doc{};          // one line
    std::string_view commands = "all";  // "all", or e.g. "run, serve"; unused by a binary without commands
    std::string_view flag_of{};  // Env only: the flag it stands in for ("api-key"); a given flag wins
    std::string_view used_by{};  // fault hooks (--fault-*) only: the tests that use it
};

// -h, --help: every binary's, every command's.
inline constexpr Option kHelp{.name = "help", .short_name = 'h', .type = Type::Bool, .default_value = "false",
                              .doc = "this help"};

struct Command {
    std::string_view name{};
    std::string_view usage{};  // usage lines, '\n'-separated
};

struct Program {
    std::string_view name{};     // the binary: "inkling"
    std::string_view summary{};  // one line
    std::string_view usage{};    // usage lines of a binary without commands
    std::string_view doc_page{};  // the page of docs/ that explains it: "engine.md"
    std::span<const Command> commands{};
    std::span<const Option> options{};
};

// True when `o` applies to `command` ("" for a binary without commands).
bool applies(const Option& o, std::string_view command);
// The commands of `o` one by one ("all" spelled out as the program's commands).
std::vector<std::string_view> commands_of(const Program& p, const Option& o);
bool has_command(const Program& p, std::string_view command);
// The declaration of kind `kind` named `name` that applies to `command`, or null.
const Option* find(const Program& p, Kind kind, std::string_view name, std::string_view command = {});
// Mistakes in the declarations, one line each (empty: none): the doc tool refuses them.
std::vector<std::string> problems(const Program& p);

}  // namespace inkling::cli
