#include "tools/coli/options.h"

namespace coli {
namespace {

using inkling::cli::Kind;
using inkling::cli::Type;

constexpr inkling::cli::Command kCommands[] = {
    {"chat", "coli chat [options]"},
    {"run", "coli run \"prompt\" [options]"},
    {"serve", "coli serve [gateway options]   (inkling-gateway in the foreground, given every argument)"},
};

constexpr inkling::cli::Option kOptions[] = {
    {.kind = Kind::Positional, .name = "command", .value_name = "COMMAND", .doc = "chat, run or serve"},
    {.kind = Kind::Positional, .name = "prompt", .value_name = "PROMPT", .doc = "the prompt for run",
     .commands = "run"},
    // where the answers come from
    {.name = "attach", .value_name = "URL", .default_value = "http://127.0.0.1:8000",
     .doc = "gateway URL, probed first (/health, then /v1/models)", .commands = "chat, run"},
    {.name = "no-attach", .type = Type::Bool, .default_value = "false",
     .doc = "never use a gateway: always a private engine", .commands = "chat, run"},
    {.name = "api-key", .value_name = "KEY", .doc = "API key for the gateway", .commands = "chat, run"},
    {.name = "model", .value_name = "DIR", .default_doc = "the committed models/inkling-demo",
     .doc = "model directory for a private engine", .commands = "chat, run"},
    {.name = "engine", .value_name = "PATH", .default_sibling = "inkling", .doc = "engine binary for a private engine",
     .commands = "chat, run"},
    {.name = "ctx", .type = Type::Int, .value_name = "N", .default_value = "4096",
     .doc = "context for a private engine", .commands = "chat, run"},
    // each turn
    {.name = "effort", .value_name = "LEVEL", .default_value = "none",
     .doc = "thinking effort: none, minimal, low, medium, high, xhigh", .commands = "chat, run"},
    {.name = "temperature", .type = Type::Double, .value_name = "T", .default_value = "0.7",
     .doc = "sampling temperature", .commands = "chat, run"},
    {.name = "top-p", .type = Type::Double, .value_name = "P", .default_value = "1", .doc = "nucleus mass",
     .commands = "chat, run"},
    {.name = "max-tokens", .type = Type::Int, .value_name = "N", .default_value = "1024", .doc = "tokens per answer, 1..1048576",
     .commands = "chat, run"},
    {.name = "system", .value_name = "TEXT", .doc = "a system message", .commands = "chat, run"},
    {.name = "audio", .value_name = "F.wav", .doc = "a WAV clip to send with the prompt", .commands = "run"},
    inkling::cli::kHelp,
};

constexpr inkling::cli::Program kProgram{
    .name = "coli",
    .summary = "Chat with an Inkling model.",
    .doc_page = "coli.md",
    .commands = kCommands,
    .options = kOptions,
};

}  // namespace

const inkling::cli::Program& program() { return kProgram; }

}  // namespace coli
