#include "tools/dmel/options.h"

namespace inkling::dmel {
namespace {

using cli::Kind;
using cli::Type;

constexpr cli::Option kOptions[] = {
    {.kind = Kind::Positional, .name = "input", .value_name = "IN.wav", .doc = "WAV file (any rate, any channels)"},
    {.kind = Kind::Positional, .name = "output", .value_name = "OUT.dmel", .doc = "DMel file to write"},
    {.name = "json", .type = Type::Bool, .default_value = "false",
     .doc = "print a JSON summary to stdout (format, sample and frame counts, rms, boost, notes)"},
    {.name = "boost", .value_name = "MODE", .default_value = "on",
     .doc = "RMS boost of quiet clips: on (what the model saw in training) or off (as HF transformers)"},
    {.name = "quality", .value_name = "CONVERTER", .default_value = "best",
     .doc = "libsamplerate converter: best, medium, fastest, zoh, linear"},
    {.name = "dump-16k", .value_name = "F.f32",
     .doc = "also write the 16 kHz mono float32 samples (raw little-endian), tools/reference/dmel_ref.py's input"},
    cli::kHelp,
};

constexpr cli::Program kProgram{
    .name = "inkling-dmel",
    .summary = "WAV (any rate, any channels) → 16 kHz mono → DMel frames [frames][80] u8.",
    .usage = "inkling-dmel IN.wav OUT.dmel [--json] [--boost on|off] [--quality best|medium|fastest|zoh|linear]",
    .doc_page = "audio.md",
    .options = kOptions,
};

}  // namespace

const cli::Program& program() { return kProgram; }

}  // namespace inkling::dmel
