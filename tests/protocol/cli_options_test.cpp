// protocol/cli: declarations registered per command, arguments of another command refused
// with the commands they belong to, environment reads only of declared variables, the
// checks the doc tool runs on declarations, and the Markdown rows.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "protocol/cli/cxxopts_bind.h"
#include "protocol/cli/env.h"
#include "protocol/cli/markdown.h"

using namespace inkling::cli;

namespace {

constexpr Command kCommands[] = {{"run", "demo run"}, {"serve", "demo serve"}};
constexpr Option kOptions[] = {
    {.kind = Kind::Positional, .name = "command", .value_name = "COMMAND", .doc = "run or serve"},
    {.name = "slots", .type = Type::Int, .value_name = "N", .default_value = "4", .doc = "slots", .commands = "serve"},
    {.name = "threads", .type = Type::Unsigned, .value_name = "N", .default_value = "0", .doc = "for serve",
     .commands = "serve"},
    {.name = "threads", .type = Type::Unsigned, .value_name = "N", .default_value = "2", .doc = "for run",
     .commands = "run"},
    {.name = "n", .type = Type::Int, .value_name = "N", .default_value = "32", .doc = "tokens", .commands = "run"},
    {.name = "fault-x", .type = Type::Int, .value_name = "N", .doc = "fakes x", .commands = "serve",
     .used_by = "tests/x.py"},
    {.kind = Kind::Env, .name = "DEMO_CLI_FAULT_X", .type = Type::Int, .value_name = "N", .doc = "as --fault-x",
     .commands = "serve", .flag_of = "fault-x"},
    {.name = "help", .short_name = 'h', .type = Type::Bool, .default_value = "false", .doc = "a <|pipe|>"},
};
constexpr Program kDemo{.name = "demo", .summary = "A demo.", .doc_page = "demo.md", .commands = kCommands,
                        .options = kOptions};

cxxopts::ParseResult parse(std::vector<const char*> argv, std::initializer_list<std::string_view> commands = {}) {
    cxxopts::Options options("demo");
    add_options(options, kDemo, commands);
    argv.insert(argv.begin(), "demo");
    return options.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
}

std::string refusal(const cxxopts::ParseResult& args, std::string_view command) {
    try {
        check_applies(args, kDemo, command);
    } catch (const cxxopts::exceptions::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("cli: a command's table holds its flags only, each with its own default") {
    auto run = parse({"run"}, {"run"});
    CHECK(run["threads"].as<unsigned>() == 2);
    CHECK(run["n"].as<int>() == 32);
    CHECK_THROWS_AS(parse({"run", "--slots", "3"}, {"run"}), cxxopts::exceptions::exception);
    auto serve = parse({"serve", "--slots", "3"}, {"serve"});
    CHECK(serve["slots"].as<int>() == 3);
    CHECK(serve["threads"].as<unsigned>() == 0);
}

TEST_CASE("cli: the union parses every command's flags, then a flag of another command is refused by name") {
    auto args = parse({"run", "--slots", "3"});
    CHECK(args["command"].as<std::string>() == "run");
    CHECK(refusal(args, "run") == "--slots is not a flag of demo run (it belongs to serve)");
    CHECK(refusal(args, "serve").empty());
    CHECK(refusal(parse({"serve", "-n", "4"}), "serve") == "-n is not a flag of demo serve (it belongs to run)");
    CHECK(refusal(parse({"run", "-h"}), "run").empty());
    CHECK(refusal(parse({"run", "stray"}), "run") == "unexpected argument 'stray'");
}

TEST_CASE("cli: help lists the command's flags and usage, not another command's") {
    const std::string h = help(kDemo, {"serve"});
    CHECK(h.find("demo serve") != std::string::npos);
    CHECK(h.find("--slots N") != std::string::npos);
    CHECK(h.find("demo run") == std::string::npos);
    CHECK(h.find("-n N") == std::string::npos);
    const std::string all = help(kDemo);
    CHECK(all.find("demo run") != std::string::npos);
    CHECK(all.find("demo serve") != std::string::npos);
}

TEST_CASE("cli: env reads a declared variable for its commands, unset or empty is absent, undeclared is a bug") {
    ::unsetenv("DEMO_CLI_FAULT_X");
    CHECK(!env(kDemo, "DEMO_CLI_FAULT_X"));
    ::setenv("DEMO_CLI_FAULT_X", "", 1);
    CHECK(!env(kDemo, "DEMO_CLI_FAULT_X"));
    ::setenv("DEMO_CLI_FAULT_X", "7", 1);
    CHECK(env(kDemo, "DEMO_CLI_FAULT_X") == "7");
    CHECK(env(kDemo, "DEMO_CLI_FAULT_X", "serve") == "7");
    CHECK(!env(kDemo, "DEMO_CLI_FAULT_X", "run"));  // declared for serve only
    ::unsetenv("DEMO_CLI_FAULT_X");
    CHECK_THROWS_AS(env(kDemo, "HOME"), std::logic_error);
}

TEST_CASE("cli: problems() finds the declaration mistakes the doc tool refuses") {
    CHECK(problems(kDemo).empty());
    constexpr Option bad[] = {
        {.name = "Bad_Name", .type = Type::Bool, .doc = "x"},
        {.name = "fault-y", .type = Type::Int, .value_name = "N", .doc = "no test named", .commands = "serve"},
        {.name = "slots", .type = Type::Int, .doc = "no value name", .commands = "stop"},
        {.name = "twice", .type = Type::Bool, .doc = "a", .commands = "run"},
        {.name = "twice", .type = Type::Bool, .doc = "b", .commands = "run, serve"},
        {.kind = Kind::Env, .name = "DEMO_Y", .value_name = "V", .doc = "stands in for nothing", .flag_of = "nope"},
    };
    const Program p{.name = "demo", .commands = kCommands, .options = bad};
    const auto found = problems(p);
    auto has = [&](std::string_view text) {
        for (const auto& f : found)
            if (f.find(text) != std::string::npos) return true;
        return false;
    };
    CHECK(has("demo --Bad_Name: a flag or positional is kebab-case"));
    CHECK(has("demo --fault-y: a fault hook is a --fault-* flag that names its tests"));
    CHECK(has("demo --slots: a value name exactly when it takes a value"));
    CHECK(has("demo --slots: unknown command 'stop'"));
    CHECK(has("demo --twice: declared twice for run"));
    CHECK(has("demo DEMO_Y: stands in for --nope, which is no flag"));
}

TEST_CASE("cli: the Markdown has a row per argument, '|' escaped, and the fault hook with its variable") {
    const Program* programs[] = {&kDemo};
    const std::string md = configuration_markdown(programs);
    CHECK(md.find("| `-n N` | run | integer | `32` | tokens |\n") != std::string::npos);
    CHECK(md.find("| `--threads N` | serve | integer ≥ 0 | `0` | for serve |\n") != std::string::npos);
    CHECK(md.find("| `-h`, `--help` | all | switch | off | a <\\|pipe\\|> |\n") != std::string::npos);
    CHECK(md.find("| `DEMO_CLI_FAULT_X` | demo serve | integer | `--fault-x` | as --fault-x |\n") != std::string::npos);
    CHECK(md.find("| `--fault-x N` or `DEMO_CLI_FAULT_X=N` | demo serve | fakes x | tests/x.py |\n") !=
          std::string::npos);
}

TEST_CASE("cli: a repeatable flag keeps each value whole, commas included") {
    // cxxopts splits vector values at commas unless told otherwise (protocol/cli/cxxopts.h).
    static constexpr Option options[] = {{.name = "engine-arg", .type = Type::Strings, .value_name = "ARG", .doc = "repeatable"}};
    static constexpr Program program{.name = "demo", .summary = "A demo.", .doc_page = "demo.md", .options = options};
    cxxopts::Options o("demo");
    add_options(o, program);
    std::vector<const char*> argv = {"demo", "--engine-arg=--stop=a,b", "--engine-arg", "https://a.example,https://b.example"};
    auto args = o.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
    CHECK(args["engine-arg"].as<std::vector<std::string>>() ==
          std::vector<std::string>{"--stop=a,b", "https://a.example,https://b.example"});
}
