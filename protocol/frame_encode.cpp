#include "protocol/frame_encode.h"

#include <cmath>
#include <type_traits>

#include "protocol/fields.h"
#include "protocol/submit_header.h"

namespace inkling::protocol {
namespace {

// Log-probs are printed with 6 decimals, as upstream; -inf and nan spelled out (a
// log-probability is never +inf).
std::string logprob_text(double lp) {
    return std::isinf(lp) ? std::string("-inf") : format_fixed(lp, 6);
}

// STAT numbers must be finite on the wire (clients reject the frame otherwise): a rate
// over zero elapsed time becomes 0.
std::string stat_number(double v, int decimals) { return format_fixed(std::isfinite(v) ? v : 0.0, decimals); }

// With top_bytes (data_logprobs) each alternative also carries its bytes' length (§6.3).
std::string logprobs_tail(const TokenLogprobs& lp) {
    std::string out = " " + logprob_text(lp.logprob) + " " + std::to_string(lp.top.size());
    const bool sized = !lp.top_bytes.empty();
    for (std::size_t i = 0; i < lp.top.size(); ++i) {
        out += " " + std::to_string(lp.top[i].first) + " " + logprob_text(lp.top[i].second);
        if (sized) out += " " + std::to_string(i < lp.top_bytes.size() ? lp.top_bytes[i].size() : 0);
    }
    return out;
}

// A DATA payload: the token's bytes, then (data_logprobs) each alternative's.
std::size_t data_payload_size(const Data& d) {
    std::size_t n = d.bytes.size();
    if (d.logprobs)
        for (const auto& b : d.logprobs->top_bytes) n += b.size();
    return n;
}

// ERROR details are one line: CR and LF become spaces.
std::string one_line(std::string text) {
    for (char& c : text)
        if (c == '\r' || c == '\n') c = ' ';
    return text;
}

}  // namespace

std::string encode_header(const Frame& frame) {
    return std::visit(
        [](const auto& f) -> std::string {
            using T = std::decay_t<decltype(f)>;
            if constexpr (std::is_same_v<T, Submit>) {
                return format_submit_header(f);
            } else if constexpr (std::is_same_v<T, Stop>) {
                return "STOP " + f.id;
            } else if constexpr (std::is_same_v<T, Cancel>) {
                return "CANCEL " + f.id;
            } else if constexpr (std::is_same_v<T, StatsRequest>) {
                return "STATS";
            } else if constexpr (std::is_same_v<T, Ready>) {
                return std::string(kReadySentinel.substr(0, kReadySentinel.size() - 1));
            } else if constexpr (std::is_same_v<T, Accept>) {
                std::string line = "ACCEPT " + f.id + " " + std::to_string(f.prompt_tokens);
                if (f.reused) line += " reused=" + std::to_string(*f.reused);
                return line;
            } else if constexpr (std::is_same_v<T, Data>) {
                std::string header = "DATA " + f.id + " " + std::to_string(data_payload_size(f));
                if (f.logprobs) header += logprobs_tail(*f.logprobs);
                return header;
            } else if constexpr (std::is_same_v<T, Echo>) {
                return "ECHO " + f.id + " " + std::to_string(f.bytes.size()) + " " + std::to_string(f.pos) +
                       logprobs_tail(f.logprobs);
            } else if constexpr (std::is_same_v<T, Done>) {
                const DoneStats& s = f.stat;
                std::string line = "DONE " + f.id + " STAT " + std::to_string(s.emitted) + " " +
                                   stat_number(s.tokens_per_second, 3) + " " +
                                   stat_number(s.cache_hit_pct, 1) + " " +
                                   stat_number(s.rss_gb, 3) + " " +
                                   std::to_string(s.prompt_tokens) + " " +
                                   (s.length_limited ? "1" : "0");
                for (const auto& [key, value] : s.extra) line += " " + key + "=" + value;
                return line;
            } else if constexpr (std::is_same_v<T, Error>) {
                std::string line = "ERROR " + f.id + " " + std::string(to_string(f.code));
                if (!f.detail.empty()) line += " " + one_line(f.detail);
                return line;
            } else if constexpr (std::is_same_v<T, Stats>) {
                return "STATS " + std::to_string(f.json.size());
            } else {
                static_assert(std::is_same_v<T, Event>);
                return "EVENT " + std::to_string(f.json.size());
            }
        },
        frame);
}

std::string encode(const Frame& frame) {
    std::string out = encode_header(frame);
    out += '\n';
    std::visit(
        [&](const auto& f) {
            using T = std::decay_t<decltype(f)>;
            if constexpr (std::is_same_v<T, Submit>) {
                out += f.prompt;
                out += f.extension;
                out += f.grammar;
                out += '\n';
            } else if constexpr (std::is_same_v<T, Data>) {
                out += f.bytes;
                if (f.logprobs)
                    for (const auto& b : f.logprobs->top_bytes) out += b;
                out += '\n';
            } else if constexpr (requires { f.bytes; }) {
                out += f.bytes;
                out += '\n';
            } else if constexpr (requires { f.json; }) {
                out += f.json;
                out += '\n';
            }
        },
        frame);
    return out;
}

}  // namespace inkling::protocol
