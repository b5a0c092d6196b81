// The frames of the engine wire, one typed struct each. encode() (frame_encode.h) is the
// only writer of these bytes and FrameReader (frame_reader.h) the only reader; PROTOCOL.md
// is the normative description of both.
//
//   client → engine: SUBMIT, STOP, CANCEL, STATS (a request, no payload)
//   engine → client: READY, ACCEPT, DATA, ECHO, DONE, ERROR, STATS (JSON), EVENT (JSON)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "protocol/error_code.h"

namespace inkling::protocol {

// The first bytes an engine writes on stdout, exactly: 01 01 'READY' 01 01 0A.
inline constexpr std::string_view kReadySentinel{"\x01\x01READY\x01\x01\n", 10};

// Per-request `key=value` extensions of SUBMIT. Absent keys keep these defaults.
struct SubmitOptions {
    std::optional<std::uint64_t> seed;               // seed=N: sampling RNG seed
    std::uint32_t top_k = 0;                          // top_k=N: 0 = no top-k cut
    double repetition_penalty = 1.0;                  // repetition_penalty=F: 1 = off
    bool ids = false;                                 // ids=1: prompt is decimal token ids
    std::uint32_t logprobs = 0;                       // logprobs=K: per-token log-probs
    bool pin = false;                                 // pin=1: snapshot after prefill
    bool reset = false;                               // reset=1: drop the slot's state first
    std::uint32_t data_logprobs = 0;                  // data_logprobs=K: DATA log-probs only, alternatives' bytes

    bool operator==(const SubmitOptions&) const = default;
    bool is_default() const { return *this == SubmitOptions{}; }
};

struct Submit {
    std::string id;
    std::uint32_t slot = 0;
    std::uint64_t max_tokens = 1;
    double temperature = 0.0;
    double top_p = 1.0;
    std::string prompt;     // exactly the prompt bytes (UTF-8 text, or ids with ids=1)
    std::string extension;  // the extension's DMel audio bytes (u8 [frames][80])
    std::string grammar;    // grammar=N: the extension's last N bytes, a constraint (§12.3)
    SubmitOptions options;
    bool operator==(const Submit&) const = default;
};

struct Stop {
    std::string id;
    bool operator==(const Stop&) const = default;
};

struct Cancel {
    std::string id;
    bool operator==(const Cancel&) const = default;
};

// Client asks for one STATS frame now.
struct StatsRequest {
    bool operator==(const StatsRequest&) const = default;
};

struct Ready {
    bool operator==(const Ready&) const = default;
};

struct Accept {
    std::string id;
    std::uint64_t prompt_tokens = 0;
    std::optional<std::uint64_t> reused;  // prompt tokens served from a cached prefix
    bool operator==(const Accept&) const = default;
};

// Log-probability of the chosen token plus k alternatives (unsorted, as upstream).
// logprob is NaN when there is nothing to condition on (encoded `nan 0`).
struct TokenLogprobs {
    TokenLogprobs() = default;
    // A constructor (not an aggregate) so that {lp, top} stays complete without top_bytes.
    TokenLogprobs(double logprob, std::vector<std::pair<std::uint32_t, double>> top,
                  std::vector<std::string> top_bytes = {})
        : logprob(logprob), top(std::move(top)), top_bytes(std::move(top_bytes)) {}
    double logprob = 0.0;
    std::vector<std::pair<std::uint32_t, double>> top;
    // With data_logprobs=K: each alternative's decoded bytes, in the order of `top` (the wire
    // carries them after the token's own bytes, §6.3); empty otherwise.
    std::vector<std::string> top_bytes;
    bool operator==(const TokenLogprobs&) const = default;
};

struct Data {
    std::string id;
    std::string bytes;  // the decoded token text; UTF-8 may be split across frames
    std::optional<TokenLogprobs> logprobs;
    bool operator==(const Data&) const = default;
};

// One prompt position's log-probs, sent during prefill when logprobs=K.
struct Echo {
    std::string id;
    std::uint64_t pos = 0;
    std::string bytes;
    TokenLogprobs logprobs;
    bool operator==(const Echo&) const = default;
};

struct DoneStats {
    std::uint64_t emitted = 0;
    double tokens_per_second = 0.0;
    double cache_hit_pct = 0.0;
    double rss_gb = 0.0;
    std::uint64_t prompt_tokens = 0;
    bool length_limited = false;
    // Further `key=value` fields (ours: reused=, ttft_ms=, …); peers ignore unknown ones.
    std::vector<std::pair<std::string, std::string>> extra;
    bool operator==(const DoneStats&) const = default;
};

struct Done {
    std::string id;
    DoneStats stat;
    bool operator==(const Done&) const = default;
};

struct Error {
    std::string id;  // "0" when the offending header's id could not be read
    ErrorCode code = ErrorCode::Internal;
    std::string detail;
    bool operator==(const Error&) const = default;
};

// JSON payloads, one line of compact JSON (no raw LF), so a peer that skips unknown
// lines stays in step.
struct Stats {
    std::string json;
    bool operator==(const Stats&) const = default;
};

struct Event {
    std::string json;
    bool operator==(const Event&) const = default;
};

using Frame = std::variant<Submit, Stop, Cancel, StatsRequest, Ready, Accept, Data, Echo,
                           Done, Error, Stats, Event>;

// Which side of the pipe a reader sits on: the set of frames it accepts differs.
enum class Direction {
    ToEngine,    // the engine reads what clients send
    FromEngine,  // a client (gateway, coli, conformance suite) reads what an engine sends
};

// The id used in ERROR frames when a header's own id is unreadable.
inline constexpr std::string_view kUnknownId = "0";

}  // namespace inkling::protocol
