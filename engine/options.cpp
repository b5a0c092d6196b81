#include "engine/options.h"

namespace inkling::engine {
namespace {

using cli::Kind;
using cli::Type;

constexpr cli::Command kCommands[] = {
    {"run", "inkling run --model DIR (--prompt TEXT | --ids 1,2,3) [options]"},
    {"serve", "inkling serve --model DIR [--slots N] [--ctx N] [--threads N]"},
    {"eval", "inkling eval --model DIR (--text FILE | --ids 1,2,3) [--ctx WINDOW]"},
    {"info", "inkling info --model DIR"},
    {"bench", "inkling bench --model DIR [--prompt-tokens N] [--decode-tokens N]\n"
              "inkling bench --kernels [--kernel-mb 256] [--kernel-shape 14336x4096] [--threads N] [--isa ISA]\n"
              "inkling bench --device-kernels [--kernel-mb 256] [--vk-device N]\n"
              "inkling bench --sampling"},
    {"convert", "inkling convert SRC DST [--experts int4|int8] [--dense keep|int8|int4g64] [--keep-audio]"},
};

// The commands that load a model and run the forward (convert has flags of its own).
constexpr std::string_view kForward = "run, serve, eval, bench";

constexpr cli::Option kOptions[] = {
    {.kind = Kind::Positional, .name = "command", .value_name = "COMMAND",
     .doc = "run, serve, eval, info or bench (convert comes first and has flags of its own)",
     .commands = "run, serve, eval, info, bench"},
    {.name = "model", .value_name = "DIR", .doc = "model directory (config.json, *.safetensors, tokenizer.json)",
     .commands = "run, serve, eval, info, bench"},
    // run: the prompt and what to print
    {.name = "prompt", .value_name = "TEXT", .doc = "prompt text (needs tokenizer.json)", .commands = "run"},
    {.name = "ids", .value_name = "1,2,3", .doc = "token ids, comma-separated: run's prompt, or eval's text",
     .commands = "run, eval"},
    {.name = "text", .value_name = "FILE", .doc = "the text file to score (needs tokenizer.json)", .commands = "eval"},
    {.name = "n", .type = Type::Int, .value_name = "N", .default_value = "32",
     .doc = "tokens to generate (stops early at EOS)", .commands = "run"},
    {.name = "chat", .type = Type::Bool, .default_value = "false",
     .doc = "wrap --prompt in the TMLv0 chat template", .commands = "run"},
    {.name = "effort", .value_name = "LEVEL", .default_value = "none",
     .doc = "thinking effort for --chat: none, minimal, low, medium, high, max", .commands = "run"},
    {.name = "audio", .value_name = "F.dmel",
     .doc = "DMel frames (raw u8 [frames][80]) for the <|audio|> placeholders; implies --chat", .commands = "run"},
    {.name = "json", .type = Type::Bool, .default_value = "false",
     .doc = "print one JSON object (ids, tokens, text, prompt_argmax, last_logits, timings)", .commands = "run"},
    // run: sampling
    {.name = "temperature", .type = Type::Double, .value_name = "T", .default_value = "0", .doc = "0 = greedy",
     .commands = "run"},
    {.name = "top-p", .type = Type::Double, .value_name = "P", .default_value = "1", .doc = "nucleus sampling mass",
     .commands = "run"},
    {.name = "top-k", .type = Type::Unsigned, .value_name = "K", .default_value = "0", .doc = "0 = off",
     .commands = "run"},
    {.name = "repetition-penalty", .type = Type::Double, .value_name = "R", .default_value = "1", .doc = "1 = off",
     .commands = "run"},
    {.name = "seed", .type = Type::UInt64, .value_name = "S", .default_value = "0", .doc = "sampling seed",
     .commands = "run"},
    // sizes and threads
    {.name = "ctx", .type = Type::Int64, .value_name = "N",
     .default_doc = "run: prompt + n + 1; serve: 4096; eval: 1024",
     .doc = "context capacity in tokens (serve: per slot; eval: the window scored from a fresh state)",
     .commands = "run, serve, eval"},
    {.name = "threads", .type = Type::Unsigned, .value_name = "N", .default_value = "0",
     .doc = "compute threads (0 = all cores)", .commands = kForward},
    {.name = "isa", .value_name = "ISA", .default_doc = "the best the CPU has",
     .doc = "kernel ISA: scalar (the plain reference path), avx2, avx512 (x86-64); scalar, neon, dotprod, i8mm "
            "(ARM64)",
     .commands = "run, serve, eval, info, bench"},
    {.name = "numerics", .value_name = "MODE", .default_doc = "exact",
     .doc = "products with bf16 weights: exact (f32 activations) or bf16 (activations rounded to bf16 first, as "
            "transformers' bf16 mode; on AMD Zen 4 it runs AVX-512 BF16 dot products, 1.3-1.9x faster prefill; "
            "docs/performance.md)",
     .commands = "run, serve, eval, info, bench"},
    {.name = "lane-order", .value_name = "MODE", .default_value = "auto",
     .doc = "int8 weights in the lane order (each 32-bit lane of a 64-byte vector one block, moved once as "
            "they load) where the kernels read it, AVX-512 VNNI: auto, or off (column order, as stored). "
            "Copied safetensors and expert records are packed; mapped safetensors stay as they are",
     .commands = kForward},
    {.name = "load-weights", .value_name = "MODE", .default_value = "auto",
     .doc = "where the safetensors bytes live: map (the files mapped: the page cache, shared between processes), "
            "copy (read into the engine's own memory on huge pages: decode reads every weight a token, and 4 KiB "
            "pages cost a TLB miss each; mid model on Zen 4 0.72-0.79 -> 0.84-0.88 of the read loop), or auto "
            "(copy when the OS offers huge pages and the files take at most half the available memory)",
     .commands = kForward},
    // serve
    {.name = "slots", .type = Type::Int, .value_name = "N", .default_value = "4",
     .doc = "KV slots (concurrent conversations), 1..256", .commands = "serve"},
    {.name = "prefill-chunk", .type = Type::Int64, .value_name = "N", .default_value = "256",
     .doc = "prompt tokens per round and request (bounds STOP/CANCEL latency during prefill)", .commands = "serve"},
    {.name = "load-events", .type = Type::Bool, .default_value = "false",
     .doc = "before READY, an EVENT load_progress frame each time the load moves on (the gateway's start-up "
            "deadline resets on them)",
     .commands = "serve"},
    {.name = "snapshot-pins", .type = Type::Size, .value_name = "N", .default_value = "64",
     .doc = "pinned snapshots kept (SUBMIT pin=1 and turn boundaries), least recently used dropped first",
     .commands = "serve"},
    {.name = "snapshot-mb", .type = Type::Size, .value_name = "MIB",
     .default_doc = "256, or room for 4 snapshots a slot when that is more",
     .doc = "memory the pinned snapshots may hold (their conv states and sliding-window rings), least recently "
            "used dropped first; 0: no snapshots",
     .commands = "serve"},
    {.name = "turn-tokens", .value_name = "LIST", .default_doc = "the tokenizer's <|message_*|> ids",
     .doc = "token ids that open a message, comma-separated: the prefill is pinned before each (a turn boundary), "
            "so a regenerated or edited turn reuses the conversation up to it; none: no boundaries",
     .commands = "serve"},
    // bench
    {.name = "prompt-tokens", .type = Type::Int, .value_name = "N", .default_value = "128", .doc = "prompt length",
     .commands = "bench"},
    {.name = "decode-tokens", .type = Type::Int, .value_name = "N", .default_value = "32", .doc = "tokens decoded",
     .commands = "bench"},
    {.name = "sessions", .value_name = "LIST", .doc = "concurrent session counts for aggregate decode, e.g. 1,2,4,8",
     .commands = "bench"},
    {.name = "reuse-tokens", .type = Type::Int, .value_name = "N", .default_value = "0",
     .doc = "conversation length for the prefix-reuse TTFT figures (a follow-up turn; a regenerated last turn "
            "from its turn boundary's snapshot), reused vs cold (0 = skip)", .commands = "bench"},
    {.name = "kernels", .type = Type::Bool, .default_value = "false",
     .doc = "the matmul kernels alone (int8, int4, bf16) on synthetic weights; no --model", .commands = "bench"},
    {.name = "sampling", .type = Type::Bool, .default_value = "false",
     .doc = "the sampler alone on synthetic logits over a 201,024-entry vocabulary (greedy, temperature, top-p, "
            "top-k): ms a token; no --model", .commands = "bench"},
    {.name = "device-kernels", .type = Type::Bool, .default_value = "false",
     .doc = "the Vulkan device's copy bandwidth and the chain's GEMV against it; no --model", .commands = "bench"},
    {.name = "kernel-mb", .type = Type::Size, .value_name = "MIB", .default_value = "256",
     .doc = "--kernels: at least this many MiB of distinct matrices per format at n = 1 (make bench passes 1024, "
            "beyond any cache); --device-kernels: MiB copied",
     .commands = "bench"},
    {.name = "kernel-shape", .value_name = "ROWSxCOLS", .default_value = "14336x4096",
     .doc = "--kernels: the weight matrices' shape, output rows x columns (e.g. 1024x1024, a small model's decode "
            "products); ggml's figures are printed beside ours at the default shape only",
     .commands = "bench"},
    // converted models: the expert cache
    {.name = "cap", .type = Type::Int, .value_name = "N", .default_doc = "half the free RAM",
     .doc = "converted models: expert cache slots per sparse layer, 1..E", .commands = kForward},
    {.name = "ram-gb", .type = Type::Double, .value_name = "X",
     .doc = "converted models: the cap whose slots fill X GB over all sparse layers", .commands = kForward},
    {.name = "pin-experts", .type = Type::Int, .value_name = "N", .default_doc = "cap/2",
     .doc = "converted models: experts pinned per layer from the usage history (below the cap)",
     .commands = kForward},
    {.name = "usage-file", .value_name = "PATH", .default_doc = "`MODEL/expert-usage.json`",
     .doc = "converted models: the expert usage history (off: none)", .commands = kForward},
    {.name = "warm-experts", .value_name = "MODE", .default_value = "on",
     .doc = "converted models: on (after start, read the experts the usage history ranks first into the cache's "
            "empty slots in the background, below demand reads; never evicting) or off",
     .commands = kForward},
    // the Vulkan chain (docs/vulkan.md)
    {.name = "vulkan", .value_name = "MODE", .default_value = "auto",
     .doc = "auto (a GPU if there is one), on (any device, lavapipe too), off, prompts (prompt steps only)",
     .commands = kForward},
    {.name = "vk-device", .type = Type::Int, .value_name = "N",
     .default_doc = "discrete > integrated > virtual > other > CPU driver",
     .doc = "Vulkan device index, in vulkaninfo's order (also bench --device-kernels)", .commands = kForward},
    {.name = "vk-layers", .type = Type::Int, .value_name = "N", .default_doc = "every layer that fits",
     .doc = "tests: run only the first N layers on the device (a partial chain)", .commands = kForward},
    {.name = "vk-budget-mb", .type = Type::UInt64, .value_name = "MIB", .default_doc = "what the driver reports",
     .doc = "device memory budget in MiB", .commands = kForward},
    {.name = "vk-experts", .value_name = "N", .default_value = "auto",
     .doc = "MoE layers whose routed experts live on the device and route there (resident mode): auto (every one "
            "that fits), off, or a count from the first",
     .commands = kForward},
    {.name = "vk-gemm-rows", .type = Type::UInt64, .value_name = "N", .default_value = "32",
     .doc = "projections of N or more rows (prompt chunks) through the tiled GEMM shader instead of a GEMV a row "
            "(0: never; measured on an H200: prefill 1.5x, and below 32 rows, i.e. batched decode, slower)",
     .commands = kForward},
    {.name = "vk-stream-rows", .type = Type::UInt64, .value_name = "N", .default_value = "8",
     .doc = "experts the device's tier lacks that a step routes N rows or more to (prompt chunks) are streamed to the "
            "device through staging buffers and computed there, instead of on the host (0: never; measured on an H200, "
            "docs/performance.md)",
     .commands = kForward},
    {.name = "vk-stream-slots", .type = Type::UInt64, .value_name = "N", .default_value = "16",
     .doc = "device slots for streamed experts (two batches of N/2 in flight), taken from the expert tier's budget "
            "(at most a quarter of it); 0: no streaming",
     .commands = kForward},
    {.name = "vk-submit-dispatches", .type = Type::UInt64, .value_name = "N", .default_value = "64",
     .doc = "a step's frame is submitted without a wait once it holds N dispatches and recording goes on in the "
            "next, so the device starts while the host records (0: one submit a step)",
     .commands = kForward},
    {.name = "vk-profile", .type = Type::Bool, .default_value = "false",
     .doc = "bench: time every command on the device (timestamps) and print the device time per kernel",
     .commands = "bench"},
    // fault hooks (docs/configuration.md, "Fault hooks")
    {.name = "fault-kill-once-file", .value_name = "FILE",
     .doc = "unless FILE exists, create it and die (SIGKILL) at the first SUBMIT, before ACCEPT",
     .commands = "serve", .used_by = "tests/gateway/gateway_e2e.py (retry before ACCEPT)"},
    {.name = "fault-device-lost-after", .type = Type::Int, .value_name = "N", .default_value = "0",
     .doc = "send EVENT device_lost after N finished requests, with no device involved (0: never)",
     .commands = "serve", .used_by = "tests/gateway/gateway_e2e.py (restart at a quiet moment)"},
    {.name = "fault-hold-after", .type = Type::Int64, .value_name = "N", .default_value = "0",
     .doc = "a request that has emitted N tokens, and may emit more, emits no more until a STOP or CANCEL names it "
            "(the engine drains only once it has); 0: never",
     .commands = "serve",
     .used_by = "tests/gateway/gateway_e2e.py, tests/coli/coli_e2e.py (a 429, a hang-up, a kill, a Ctrl-C meet work in "
                "flight); tests/serve/scheduler_test.cpp"},
    {.name = "fault-vk-submit", .type = Type::UInt64, .value_name = "N", .default_doc = "`INKLING_VK_FAULT`, else 0",
     .doc = "the Vulkan chain's N-th device submit of the process and every later one fail with VK_ERROR_DEVICE_LOST "
            "(0: never)",
     .commands = kForward,
     .used_by = "tests/vulkan/serve_device_test.py (through INKLING_VK_FAULT); tests/vulkan/*_test.cpp set the same "
                "counter with vulkan::Frame::set_fault_at"},
    {.kind = Kind::Env, .name = "INKLING_VK_FAULT", .type = Type::UInt64, .value_name = "N",
     .doc = "the submit at which the Vulkan chain's device is lost, as --fault-vk-submit (tests)", .commands = kForward,
     .flag_of = "fault-vk-submit"},
    cli::kHelp,
    // convert (docs/convert.md)
    {.kind = Kind::Positional, .name = "paths", .type = Type::Strings, .value_name = "SRC DST",
     .doc = "the checkpoint to convert and the directory to write", .commands = "convert"},
    {.name = "experts", .value_name = "FORMAT", .default_value = "int4",
     .doc = "routed experts: int4 (groups of 32) or int8 (per row)", .commands = "convert"},
    {.name = "dense", .value_name = "MODE", .default_value = "keep",
     .doc = "other matrices: keep (as in SRC), int8, int4g64", .commands = "convert"},
    {.name = "keep-audio", .type = Type::Bool, .default_value = "false",
     .doc = "keep the audio tower (dropped by default)", .commands = "convert"},
    {.name = "restart", .type = Type::Bool, .default_value = "false",
     .doc = "discard an earlier conversion in DST, finished or not, and start over", .commands = "convert"},
    {.name = "threads", .type = Type::Unsigned, .value_name = "N", .default_value = "0",
     .doc = "experts converted at once (0 = one a core); the output is the same bytes for any N",
     .commands = "convert"},
    {.name = "fault-stop-after-records", .type = Type::Int64, .value_name = "N", .default_value = "-1",
     .doc = "save the state after N expert records, write half of the next and die (SIGKILL), as an interrupted "
            "run (-1: never)",
     .commands = "convert", .used_by = "tests/convert/convert_e2e.sh (resume after a kill)"},
};

constexpr cli::Program kProgram{
    .name = "inkling",
    .summary = "The Inkling engine.",
    .doc_page = "engine.md",
    .commands = kCommands,
    .options = kOptions,
};

}  // namespace

const cli::Program& program() { return kProgram; }

}  // namespace inkling::engine
