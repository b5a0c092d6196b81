#include "gateway/options.h"

namespace inkling::gateway {
namespace {

using cli::Kind;
using cli::Type;

constexpr cli::Option kOptions[] = {
    {.name = "model", .type = Type::Strings, .value_name = "[ID=]DIR",
     .doc = "model directory (config.json, *.safetensors, tokenizer.json); ID=DIR names the model (clients send "
            "ID as `model`); one engine per --model"},
    {.name = "model-id", .value_name = "ID", .default_doc = "the directory's name",
     .doc = "the model name clients send as `model` (one --model DIR only)"},
    // several models (docs/gateway.md, "Several models")
    {.name = "model-slots", .type = Type::Strings, .value_name = "ID=N",
     .doc = "engine slots of one model, instead of --slots"},
    {.name = "model-engine-arg", .type = Type::Strings, .value_name = "ID=ARG",
     .doc = "an extra engine argument for one model, after the --engine-arg ones"},
    {.name = "model-memory", .type = Type::Strings, .value_name = "ID=BYTES", .default_doc = "its files' size",
     .doc = "what one model takes resident, for --memory-budget (e.g. small=2G)"},
    {.name = "model-load", .value_name = "WHEN", .default_value = "start",
     .doc = "start: every model's engine starts with the gateway (as the budget allows); on-demand: a model's "
            "first request starts it"},
    {.name = "model-load-wait", .type = Type::Int, .value_name = "S", .default_value = "120",
     .doc = "how long a request waits for its model's engine to load or restart (then 503)"},
    {.name = "model-idle-timeout", .type = Type::Int, .value_name = "S", .default_value = "0",
     .doc = "stop a model's engine after S s without requests (0 = never); its next request loads it again"},
    {.name = "memory-budget", .value_name = "BYTES", .default_value = "0",
     .doc = "what the resident models may take in all (e.g. 48G; 0 = no limit): a load unloads idle models, "
            "least recently used first, or waits for one"},
    // listening, and who may talk to it
    {.name = "host", .value_name = "HOST", .default_value = "127.0.0.1",
     .doc = "address to listen on (a non-loopback one needs an API key)"},
    {.name = "port", .type = Type::Port, .value_name = "PORT", .default_value = "8000",
     .doc = "port to listen on (bound before the engine starts: a busy port fails at once)"},
    {.name = "api-key", .value_name = "KEY", .default_doc = "`INKLING_API_KEY`, else none",
     .doc = "require this key (Authorization: Bearer, or x-api-key) on /v1/* and /metrics"},
    {.kind = Kind::Env, .name = "INKLING_API_KEY", .value_name = "KEY",
     .doc = "the API key, as --api-key (keeps it out of the process list)", .flag_of = "api-key"},
    {.name = "allow-insecure-bind", .type = Type::Bool, .default_value = "false",
     .doc = "allow a non-loopback --host without an API key (refused otherwise)"},
    {.name = "allowed-host", .type = Type::Strings, .value_name = "HOST", .default_doc = "loopback names and --host",
     .doc = "extra Host header names accepted (repeatable; * turns the DNS-rebinding guard off)"},
    {.name = "cors-origin", .type = Type::Strings, .value_name = "ORIGIN",
     .default_doc = "`http://127.0.0.1:PORT`, `http://localhost:PORT`",
     .doc = "allowed CORS origins besides the defaults (repeatable; * allows all)"},
    {.name = "trusted-proxy", .type = Type::Strings, .value_name = "ADDR",
     .doc = "a reverse proxy's address (repeatable): its X-Forwarded-For names the client the per-address cap counts"},
    // admission and limits
    {.name = "max-connections", .type = Type::Int, .value_name = "N", .default_value = "64",
     .doc = "open connections in all; past it a new one gets 429 and is closed"},
    {.name = "max-connections-per-address", .type = Type::Int, .value_name = "N", .default_value = "8",
     .doc = "connections (behind a trusted proxy: requests) per client address; past it 429, except /health and /metrics"},
    {.name = "slots", .type = Type::Int, .value_name = "N", .default_value = "4",
     .doc = "engine KV slots (conversations served at once), 1..256"},
    {.name = "ctx", .type = Type::Int, .value_name = "N", .default_value = "4096", .doc = "context per slot in tokens"},
    {.name = "threads", .type = Type::Int, .value_name = "N", .default_value = "0",
     .doc = "engine compute threads (0 = all cores)"},
    {.name = "max-queue", .type = Type::Int, .value_name = "N", .default_value = "16",
     .doc = "requests that may wait for a slot; past it 429 with Retry-After"},
    {.name = "queue-timeout", .type = Type::Int, .value_name = "S", .default_value = "300",
     .doc = "seconds a request may wait for a slot (then 429 queue_timeout)"},
    {.name = "write-deadline", .type = Type::Int, .value_name = "S", .default_value = "30",
     .doc = "a client that reads nothing of its stream for S s is gone: CANCEL, slot freed, connection closed"},
    {.name = "accept-deadline", .type = Type::Int, .value_name = "S", .default_value = "30",
     .doc = "a request the engine has not ACCEPTed S s after SUBMIT is CANCELled: 503 + Retry-After"},
    {.name = "frame-deadline", .type = Type::Int, .value_name = "S", .default_value = "300",
     .doc = "a running request the engine sends nothing for in S s (the first token waits for the prefill) is CANCELled: "
            "an SSE error event + [DONE], or 503 + Retry-After"},
    {.name = "max-tokens", .type = Type::UInt64, .value_name = "N", .default_value = "4096",
     .doc = "cap (and default) for max_tokens / max_completion_tokens, 1..1048576"},
    {.name = "max-body", .type = Type::Size, .value_name = "BYTES", .default_value = "33554432",
     .doc = "request body limit in bytes (413 past it; audio arrives base64 inside JSON)"},
    {.name = "affinity-entries", .type = Type::Int, .value_name = "N", .default_value = "4096",
     .doc = "conversations whose slot is remembered (LRU, ~100 bytes each; 0 = none)"},
    {.name = "dmel-boost", .value_name = "MODE", .default_value = "on",
     .doc = "quiet-clip RMS boost for audio: on (as in training) or off (as transformers)"},
    // the engine child
    {.name = "engine", .value_name = "PATH", .default_sibling = "inkling", .doc = "engine binary"},
    {.name = "engine-ping", .type = Type::Int, .value_name = "S", .default_value = "5",
     .doc = "seconds between the watchdog's STATS requests to a ready engine"},
    {.name = "engine-deadline", .type = Type::Int, .value_name = "S", .default_value = "15",
     .doc = "an engine that sends nothing for S s after a STATS request is unresponsive: killed, restarted"},
    {.name = "engine-start-deadline", .type = Type::Int, .value_name = "S", .default_value = "600",
     .doc = "a loading engine that sends neither READY nor a load-progress EVENT for S s is unresponsive: killed, "
            "restarted"},
    {.name = "engine-drain-deadline", .type = Type::Int, .value_name = "S", .default_value = "60",
     .doc = "after a device loss: the requests in flight get S s to finish (nothing new is admitted), then the engine "
            "restarts"},
    {.name = "restart-settle", .type = Type::Int, .value_name = "S", .default_value = "5",
     .doc = "an engine that dies within S s of READY (or before it) is in a crash loop: restarts back off"},
    {.name = "restart-backoff-max", .type = Type::Int, .value_name = "S", .default_value = "30",
     .doc = "the longest wait between restarts in a crash loop (from 0.25 s, doubling; it never gives up)"},
    {.name = "engine-arg", .type = Type::Strings, .value_name = "ARG",
     .doc = "extra argument for the engine (repeatable), e.g. --engine-arg=--isa=avx2"},
    cli::kHelp,
};

constexpr cli::Program kProgram{
    .name = "inkling-gateway",
    .summary = "OpenAI-compatible HTTP gateway for the Inkling engine.",
    .usage = "inkling-gateway --model [ID=]DIR [--model ID=DIR …] [--host 127.0.0.1] [--port 8000] [--api-key K] "
             "[--slots N] [options]",
    .doc_page = "gateway.md",
    .options = kOptions,
};

}  // namespace

const cli::Program& program() { return kProgram; }

}  // namespace inkling::gateway
