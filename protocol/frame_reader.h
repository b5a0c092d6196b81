// Incremental reader of the wire. Feed it bytes exactly as they arrive, split anywhere;
// take frames and problems out in order with next().
//
//   FrameReader reader(Direction::ToEngine);
//   reader.feed(chunk);
//   while (auto item = reader.next()) {
//       if (auto* frame = std::get_if<Frame>(&*item)) handle(*frame);
//       else reply_error(std::get<Problem>(*item));
//   }
//
// Guarantees: memory stays bounded by the limits (an oversize header is dropped as it
// streams, a rejected payload is counted off, never stored); a rejected frame's declared
// payload is still consumed, so the next frame is read from its first byte; every
// malformed frame of a known kind yields exactly one Problem; every frame it yields
// re-encodes (encode) to bytes it reads back as the same frame.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "protocol/error_code.h"
#include "protocol/frames.h"
#include "protocol/limits.h"

namespace inkling::protocol {

// A frame that could not be accepted: what an engine answers with ERROR, and what a
// client treats as a broken engine.
struct Problem {
    std::string id{kUnknownId};
    ErrorCode code = ErrorCode::BadRequest;
    std::string detail;
    bool operator==(const Problem&) const = default;
};

using ReadItem = std::variant<Frame, Problem>;

class FrameReader {
public:
    explicit FrameReader(Direction direction, const Limits& limits = kDefaultLimits);

    void feed(std::string_view bytes);
    // The input has ended: a frame cut short becomes a BAD_FRAME problem.
    void finish();
    std::optional<ReadItem> next();

    // True while part of a frame has been read but not all of it.
    bool mid_frame() const;
    // Lines of unknown kinds skipped (engine → client direction only).
    std::uint64_t skipped_lines() const { return skipped_lines_; }

private:
    enum class State { Header, SkipLine, Payload, Trailer };

    void on_header(std::string_view line);
    void on_engine_command(std::string_view line);
    void on_engine_output(std::string_view line);
    void expect_payload(std::uint64_t bytes, bool keep);
    void on_payload_complete();
    void problem(std::string id, ErrorCode code, std::string detail);
    // Queues a parsed frame, or a problem when its canonical header (encode_header) would
    // not fit the header limit: what this reader yields always reads back the same.
    void deliver(Frame frame);
    // The id of the frame whose payload is being read ("0" if unknown).
    std::string pending_id() const;

    Direction direction_;
    Limits limits_;
    State state_ = State::Header;
    std::string line_;
    std::uint64_t remaining_ = 0;  // payload bytes still to come
    bool keep_payload_ = false;    // store them, or count them off
    std::string payload_;
    std::optional<Frame> pending_frame_;      // waiting for its payload
    std::optional<Problem> pending_problem_;  // reported once the payload is consumed
    std::deque<ReadItem> out_;
    std::uint64_t skipped_lines_ = 0;
};

}  // namespace inkling::protocol
