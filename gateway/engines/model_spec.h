// The models one gateway serves, as its command line names them:
//
//   --model DIR                     one model, named after its directory (or --model-id)
//   --model demo=models/inkling-demo --model small=/srv/small   several, each ID=DIR
//   --model-slots small=1  --model-engine-arg small=--threads=1  --model-memory small=2G
//
// The per-model flags are ID=VALUE. Pure parsing, no I/O (tests/gateway/engines/models_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inkling::gateway {

struct ModelSpec {
    std::string id;                        // what clients send as `model` ("" until named)
    std::string dir;                       // the model directory
    int slots = 0;                         // engine slots; 0: --slots
    std::vector<std::string> engine_args = {};  // after every --engine-arg
    std::uint64_t memory = 0;              // bytes it needs resident (--memory-budget); 0: its files' size
};

// "--model [ID=]DIR". An '=' names an id only when no '/' comes before it (a directory with
// '=' in its name is written ./a=b). Throws std::runtime_error naming the flag and value.
ModelSpec parse_model_value(std::string_view value);

// A per-model flag's "ID=VALUE": the spec with that id (throws, naming `flag`, when the value
// has no '=', or no --model has that id) and the VALUE.
struct ModelOption {
    ModelSpec* spec;
    std::string value;
};
ModelOption model_option(std::vector<ModelSpec>& specs, std::string_view flag, std::string_view value);

// Every id is non-empty, printable ASCII without spaces or '/', and used once; throws naming
// the one that is not.
void check_model_ids(const std::vector<ModelSpec>& specs);

// "2G", "512M", "1048576": bytes (K, M, G, T are powers of 1024); throws naming `what`.
std::uint64_t parse_bytes(std::string_view text, const std::string& what);

}  // namespace inkling::gateway
