// Server-sent events as the WHATWG HTML standard's event-stream parser reads them, for coli's
// streaming chat over the gateway (attached.cpp). The web UI and the node tests read SSE with
// gateway/web/sse.mjs, which follows the same rules.
//
//   coli::SseReader sse;
//   for (const coli::SseEvent& ev : sse.feed(bytes_just_read)) handle(ev.event, ev.data);
//
// Lines end in CRLF, LF or CR, also when a read ends between the CR and the LF; `field:value`
// loses one space after the colon; the `data` lines of an event join with "\n"; `event` names
// it ("message" by default); a line starting with ':' is a comment; a blank line dispatches the
// event (one without a data line is not). `id` and `retry` are ignored (no reconnection). An
// event the stream ends inside is never returned. Header-only: coli and the unit tests include it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace coli {

struct SseEvent {
    std::string event = "message";
    std::string data;
};

class SseReader {
public:
    // Bytes of the stream, in any pieces; returns the events they complete, in order.
    std::vector<SseEvent> feed(std::string_view bytes);

private:
    void take_line(std::string_view line, std::vector<SseEvent>& out);

    std::string partial_;     // the current line, read so far
    bool after_cr_ = false;   // the last piece ended in CR: an LF first in the next ends nothing
    std::string data_;        // the data lines, each followed by "\n"
    std::string event_;
};

inline std::vector<SseEvent> SseReader::feed(std::string_view bytes) {
    std::vector<SseEvent> out;
    if (after_cr_ && !bytes.empty()) {
        if (bytes.front() == '\n') bytes.remove_prefix(1);
        after_cr_ = false;
    }
    for (std::size_t end; (end = bytes.find_first_of("\r\n")) != std::string_view::npos;) {
        partial_.append(bytes.substr(0, end));
        take_line(partial_, out);
        partial_.clear();
        std::size_t next = end + 1;
        if (bytes[end] == '\r') {
            if (next == bytes.size()) after_cr_ = true;
            else if (bytes[next] == '\n') ++next;
        }
        bytes.remove_prefix(next);
    }
    partial_.append(bytes);
    return out;
}

inline void SseReader::take_line(std::string_view line, std::vector<SseEvent>& out) {
    if (line.empty()) {
        if (!data_.empty()) {
            data_.pop_back();  // the "\n" after the last data line
            out.push_back({event_.empty() ? "message" : event_, std::move(data_)});
        }
        data_.clear();
        event_.clear();
        return;
    }
    if (line.front() == ':') return;  // a comment (keep-alive)
    const std::size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
    if (field == "data") {
        data_.append(value);
        data_.push_back('\n');
    } else if (field == "event") {
        event_ = value;
    }
}

}  // namespace coli
