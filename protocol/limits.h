// Every numeric bound of the wire, in one place. PROTOCOL.md §Limits states the same
// numbers; tests/protocol/limits_test.cpp pins both boundaries of each.
#pragma once

#include <cstddef>
#include <cstdint>

namespace inkling::protocol {

struct Limits {
    // A header line, LF excluded. Longer lines are rejected without being buffered.
    std::size_t max_header_bytes = 4096;
    // SUBMIT payloads.
    std::uint64_t max_prompt_bytes = 16u << 20;     // 16 MiB
    std::uint64_t max_extension_bytes = 64u << 20;  // 64 MiB (DMel audio and grammar)
    std::uint64_t max_grammar_bytes = 1u << 20;     // 1 MiB: a constraint (grammar=N)
    // Engine → client payloads.
    std::uint64_t max_data_bytes = 65536;         // one DATA / ECHO token text
    std::uint64_t max_json_bytes = 4u << 20;      // STATS / EVENT payloads
    std::size_t max_id_chars = 63;
    std::uint64_t max_tokens = 1u << 20;
    std::uint64_t max_slot = 65535;
    std::uint32_t max_logprobs = 32;
    std::uint32_t max_top_k = 1u << 20;
    double max_temperature = 2.0;
    double max_repetition_penalty = 10.0;
};

inline constexpr Limits kDefaultLimits{};

}  // namespace inkling::protocol
