#include "protocol/frame_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "protocol/fields.h"
#include "protocol/frame_encode.h"
#include "protocol/submit_header.h"

namespace inkling::protocol {
namespace {

using Fields = std::vector<std::string_view>;

// The READY sentinel as a header line (its LF is the line end).
constexpr std::string_view kReadyLine = kReadySentinel.substr(0, kReadySentinel.size() - 1);
// One alternative's bytes (data_logprobs): a token is far shorter; the payload's own limit
// bounds them together.
constexpr std::uint64_t kMaxAlternativeBytes = 65536;

// Parses "<lp> <k> [<tid> <tlp>]×k" starting at fields[at]; it must end the line. With
// `sized` (DATA) the alternatives may also be "<tid> <tlp> <len>" (data_logprobs, §6.3):
// top_bytes then holds placeholders of each length, filled from the payload.
std::optional<TokenLogprobs> parse_logprobs(const Fields& f, std::size_t at,
                                            std::uint32_t max_k, bool sized = false) {
    if (f.size() < at + 2) return std::nullopt;
    auto lp = parse_logprob(f[at]);
    auto k = parse_u64(f[at + 1]);
    if (!lp || !k || *k > max_k) return std::nullopt;
    const bool with_len = sized && *k > 0 && f.size() == at + 2 + 3 * *k;
    const std::size_t width = with_len ? 3 : 2;
    if (f.size() != at + 2 + width * *k) return std::nullopt;
    TokenLogprobs out{*lp, {}, {}};
    for (std::size_t i = 0; i < *k; ++i) {
        auto token = parse_u64(f[at + 2 + width * i]);
        auto value = parse_logprob(f[at + 3 + width * i]);
        if (!token || *token > UINT32_MAX || !value) return std::nullopt;
        out.top.emplace_back(static_cast<std::uint32_t>(*token), *value);
        if (with_len) {
            auto len = parse_u64(f[at + 4 + width * i]);
            if (!len || *len > kMaxAlternativeBytes) return std::nullopt;
            out.top_bytes.emplace_back(*len, '\0');
        }
    }
    return out;
}

}  // namespace

FrameReader::FrameReader(Direction direction, const Limits& limits)
    : direction_(direction), limits_(limits) {}

bool FrameReader::mid_frame() const { return state_ != State::Header || !line_.empty(); }

std::optional<ReadItem> FrameReader::next() {
    if (out_.empty()) return std::nullopt;
    ReadItem item = std::move(out_.front());
    out_.pop_front();
    return item;
}

void FrameReader::problem(std::string id, ErrorCode code, std::string detail) {
    out_.emplace_back(Problem{std::move(id), code, std::move(detail)});
}

void FrameReader::deliver(Frame frame) {
    // The canonical form can be longer than what was read: "1" becomes "1.000", an absent
    // field 7 becomes " 0", an unknown ERROR code gains "INTERNAL ". A frame that would
    // not fit is refused here rather than written by someone else and refused there.
    const std::size_t header = encode_header(frame).size();
    if (header > limits_.max_header_bytes) {
        std::string id{kUnknownId};
        std::visit(
            [&](const auto& f) {
                if constexpr (requires { f.id; }) id = f.id;
            },
            frame);
        problem(id, direction_ == Direction::ToEngine ? ErrorCode::BadRequest : ErrorCode::BadFrame,
                "the frame's canonical header would be " + std::to_string(header) + " bytes, over the limit of " +
                    std::to_string(limits_.max_header_bytes));
        return;
    }
    out_.emplace_back(std::move(frame));
}

void FrameReader::feed(std::string_view bytes) {
    std::size_t i = 0;
    while (i < bytes.size()) {
        switch (state_) {
        case State::Header: {
            const char* start = bytes.data() + i;
            const void* lf = std::memchr(start, '\n', bytes.size() - i);
            std::size_t take = lf ? static_cast<const char*>(lf) - start : bytes.size() - i;
            if (line_.size() + take > limits_.max_header_bytes) {
                problem(std::string(kUnknownId), ErrorCode::BadFrame,
                        "header line longer than " + std::to_string(limits_.max_header_bytes) +
                            " bytes: '" + printable(line_ + std::string(start, take)) + "'");
                line_.clear();
                state_ = State::SkipLine;
                break;  // SkipLine drops the rest of this line, LF included
            }
            line_.append(start, take);
            i += take;
            if (lf) {
                ++i;  // the LF
                std::string line = std::move(line_);
                line_.clear();
                on_header(line);
            }
            break;
        }
        case State::SkipLine: {
            const void* lf = std::memchr(bytes.data() + i, '\n', bytes.size() - i);
            if (!lf) return;
            i = static_cast<const char*>(lf) - bytes.data() + 1;
            state_ = State::Header;
            break;
        }
        case State::Payload: {
            std::uint64_t take = std::min<std::uint64_t>(remaining_, bytes.size() - i);
            if (keep_payload_) payload_.append(bytes.data() + i, take);
            i += take;
            remaining_ -= take;
            if (remaining_ == 0) state_ = State::Trailer;
            break;
        }
        case State::Trailer: {
            if (bytes[i] == '\n') {
                ++i;
                state_ = State::Header;
                on_payload_complete();
            } else {
                // The byte in the LF's place is consumed and reading resumes at the next
                // byte, so a frame whose LF was replaced costs only itself.
                std::string id = pending_id();
                char found[8];
                std::snprintf(found, sizeof found, "0x%02x", static_cast<unsigned char>(bytes[i]));
                problem(id, ErrorCode::BadFrame,
                        std::string("payload not followed by LF (found byte ") + found + ")");
                ++i;
                pending_frame_.reset();
                pending_problem_.reset();
                payload_.clear();
                state_ = State::Header;
            }
            break;
        }
        }
    }
}

std::string FrameReader::pending_id() const {
    if (pending_problem_) return pending_problem_->id;
    std::string id{kUnknownId};
    if (pending_frame_) {
        std::visit(
            [&](const auto& f) {
                if constexpr (requires { f.id; }) id = f.id;
            },
            *pending_frame_);
    }
    return id;
}

void FrameReader::finish() {
    if (!mid_frame()) return;
    std::string what = state_ == State::Header ? "a header line without LF"
                       : state_ == State::SkipLine ? "an oversize header line"
                                                   : "a frame's payload";
    problem(pending_id(), ErrorCode::BadFrame, "input ended inside " + what);
    state_ = State::Header;
    line_.clear();
    payload_.clear();
    pending_frame_.reset();
    pending_problem_.reset();
}

void FrameReader::expect_payload(std::uint64_t bytes, bool keep) {
    remaining_ = bytes;
    keep_payload_ = keep;
    payload_.clear();
    // Reserve at most 1 MiB up front; a larger payload grows as its bytes arrive.
    if (keep) payload_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(bytes, 1u << 20)));
    state_ = bytes == 0 ? State::Trailer : State::Payload;
}

void FrameReader::on_payload_complete() {
    if (pending_problem_) {
        out_.emplace_back(std::move(*pending_problem_));
        pending_problem_.reset();
        pending_frame_.reset();
        payload_.clear();
        return;
    }
    if (!pending_frame_) return;
    Frame frame = std::move(*pending_frame_);
    pending_frame_.reset();
    std::string payload = std::move(payload_);
    payload_.clear();
    if (auto* submit = std::get_if<Submit>(&frame)) {
        // extension.size() and grammar.size() carried the declared lengths.
        const std::size_t grammar_at = payload.size() - submit->grammar.size();
        const std::size_t prompt_size = grammar_at - submit->extension.size();
        submit->grammar = payload.substr(grammar_at);
        submit->extension = payload.substr(prompt_size, grammar_at - prompt_size);
        payload.resize(prompt_size);
        if (auto nul = payload.find('\0'); nul != std::string::npos) {
            problem(submit->id, ErrorCode::BadRequest,
                    "NUL byte in prompt at offset " + std::to_string(nul));
            return;
        }
        submit->prompt = std::move(payload);
    } else if (auto* data = std::get_if<Data>(&frame); data && data->logprobs && !data->logprobs->top_bytes.empty()) {
        // data_logprobs: the token's bytes, then each alternative's (their lengths were held).
        std::size_t at = payload.size();
        for (auto& b : data->logprobs->top_bytes) at -= b.size();
        for (auto& b : data->logprobs->top_bytes) {
            const std::size_t len = b.size();
            b = payload.substr(at, len);
            at += len;
        }
        std::size_t own = payload.size();
        for (const auto& b : data->logprobs->top_bytes) own -= b.size();
        payload.resize(own);
        data->bytes = std::move(payload);
    } else {
        std::visit(
            [&](auto& f) {
                if constexpr (requires { f.bytes; }) f.bytes = std::move(payload);
                else if constexpr (requires { f.json; }) f.json = std::move(payload);
            },
            frame);
    }
    deliver(std::move(frame));
}

void FrameReader::on_header(std::string_view line) {
    if (line.find_first_not_of(' ') == std::string_view::npos) return;  // blank: padding
    if (direction_ == Direction::ToEngine) on_engine_command(line);
    else on_engine_output(line);
}

void FrameReader::on_engine_command(std::string_view line) {
    Fields f = split_fields(line);
    auto id_of = [&](std::size_t at) {
        return f.size() > at && is_valid_id(f[at], limits_.max_id_chars) ? std::string(f[at])
                                                                         : std::string(kUnknownId);
    };
    if (f[0] == "SUBMIT") {
        SubmitHeader h = parse_submit_header(f, limits_);
        if (!h.prompt_bytes) {  // no length to skip: the line alone is the frame
            problem(h.id, ErrorCode::BadRequest, h.problem);
            return;
        }
        // Saturate: absurd declared lengths must not wrap around to a small skip.
        std::uint64_t total = *h.prompt_bytes + h.extension_bytes;
        if (total < *h.prompt_bytes) total = UINT64_MAX;
        if (h.request) {
            // Carry the audio and grammar lengths in the frame until the payload arrives.
            h.request->extension.assign(static_cast<std::size_t>(h.extension_bytes - h.grammar_bytes), '\0');
            h.request->grammar.assign(static_cast<std::size_t>(h.grammar_bytes), '\0');
            pending_frame_ = std::move(*h.request);
            expect_payload(total, true);
        } else {
            pending_problem_ = Problem{h.id, ErrorCode::BadRequest, h.problem};
            expect_payload(total, false);
        }
        return;
    }
    if (f[0] == "STOP" || f[0] == "CANCEL") {
        if (f.size() != 2 || id_of(1) == kUnknownId) {
            problem(id_of(1), ErrorCode::BadRequest,
                    std::string(f[0]) + " takes one valid id: '" + printable(line) + "'");
            return;
        }
        if (f[0] == "STOP") deliver(Stop{std::string(f[1])});
        else deliver(Cancel{std::string(f[1])});
        return;
    }
    if (f[0] == "STATS") {
        if (f.size() != 1) {
            problem(std::string(kUnknownId), ErrorCode::BadRequest,
                    "STATS takes no fields: '" + printable(line) + "'");
            return;
        }
        deliver(StatsRequest{});
        return;
    }
    problem(std::string(kUnknownId), ErrorCode::BadRequest,
            "unknown command '" + printable(f[0], 24) + "'");
}

void FrameReader::on_engine_output(std::string_view line) {
    if (line == kReadyLine) {
        deliver(Ready{});
        return;
    }
    Fields f = split_fields(line);
    if (f.empty()) {
        ++skipped_lines_;
        return;
    }
    std::string id = f.size() > 1 && is_valid_id(f[1], limits_.max_id_chars) ? std::string(f[1])
                                                                            : std::string(kUnknownId);
    auto bad = [&](std::string_view what) {
        problem(id, ErrorCode::BadFrame,
                "malformed " + std::string(f[0]) + " (" + std::string(what) + "): '" +
                    printable(line, 96) + "'");
    };
    auto with_payload = [&](Frame frame, std::optional<std::uint64_t> n, std::uint64_t limit) {
        if (!n || *n > limit) return bad("payload length not in 0.." + std::to_string(limit));
        pending_frame_ = std::move(frame);
        expect_payload(*n, true);
    };
    const std::string_view kind = f[0];
    if (kind == "ACCEPT") {
        if (f.size() < 3 || id == kUnknownId) return bad("fields");
        auto n = parse_u64(f[2]);
        if (!n) return bad("prompt_tokens");
        Accept a{id, *n, std::nullopt};
        // Further fields are key=value; keys we do not know are a newer engine's.
        for (std::size_t i = 3; i < f.size(); ++i) {
            if (f[i].find('=') == std::string_view::npos) return bad("field is not key=value");
            if (f[i].starts_with("reused=")) {
                a.reused = parse_u64(f[i].substr(7));
                if (!a.reused) return bad("reused");
            }
        }
        deliver(std::move(a));
    } else if (kind == "DATA") {
        if (f.size() < 3 || id == kUnknownId) return bad("fields");
        Data d{id, {}, std::nullopt};
        if (f.size() > 3) {
            d.logprobs = parse_logprobs(f, 3, limits_.max_logprobs, true);
            if (!d.logprobs) return bad("log-prob tail");
        }
        auto n = parse_u64(f[2]);
        if (n && d.logprobs) {
            std::uint64_t alternatives = 0;
            for (const auto& b : d.logprobs->top_bytes) alternatives += b.size();
            if (alternatives > *n) return bad("alternatives' bytes exceed the payload");
        }
        with_payload(std::move(d), n, limits_.max_data_bytes);
    } else if (kind == "ECHO") {
        if (f.size() < 6 || id == kUnknownId) return bad("fields");
        auto pos = parse_u64(f[3]);
        auto lp = parse_logprobs(f, 4, limits_.max_logprobs);
        if (!pos || !lp) return bad("position or log-prob tail");
        with_payload(Echo{id, *pos, {}, *lp}, parse_u64(f[2]), limits_.max_data_bytes);
    } else if (kind == "DONE") {
        if (f.size() < 9 || id == kUnknownId || f[2] != "STAT") return bad("fields");
        DoneStats s;
        auto emitted = parse_u64(f[3]);
        auto tps = parse_finite_double(f[4]);
        auto hit = parse_finite_double(f[5]);
        auto rss = parse_finite_double(f[6]);
        auto prompt = parse_u64(f[7]);
        if (!emitted || !tps || !hit || !rss || !prompt || (f[8] != "0" && f[8] != "1"))
            return bad("STAT values");
        s = {*emitted, *tps, *hit, *rss, *prompt, f[8] == "1", {}};
        for (std::size_t i = 9; i < f.size(); ++i) {
            auto eq = f[i].find('=');
            if (eq == std::string_view::npos) s.extra.emplace_back("", std::string(f[i]));
            else s.extra.emplace_back(std::string(f[i].substr(0, eq)), std::string(f[i].substr(eq + 1)));
        }
        deliver(Done{id, std::move(s)});
    } else if (kind == "ERROR") {
        if (f.size() < 3) return bad("fields");
        if (f[1] != kUnknownId && id == kUnknownId) return bad("id");
        // The detail keeps its own spacing: everything after the code token.
        std::size_t after = static_cast<std::size_t>(f[2].data() + f[2].size() - line.data());
        std::string_view detail = line.substr(after);
        if (!detail.empty() && detail.front() == ' ') detail.remove_prefix(1);
        auto code = error_code_from_string(f[2]);
        if (!code) {  // a newer engine's code: still an error for that id, kept verbatim
            deliver(Error{id, ErrorCode::Internal, std::string(f[2]) + " " + std::string(detail)});
            return;
        }
        deliver(Error{id, *code, std::string(detail)});
    } else if (kind == "STATS" || kind == "EVENT") {
        if (f.size() != 2) return bad("fields");
        Frame frame = kind == "STATS" ? Frame{Stats{}} : Frame{Event{}};
        with_payload(std::move(frame), parse_u64(f[1]), limits_.max_json_bytes);
    } else {
        ++skipped_lines_;  // a newer engine's telemetry: not ours to judge
    }
}

}  // namespace inkling::protocol
