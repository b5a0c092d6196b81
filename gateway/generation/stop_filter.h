// Stop sequences, matched on the gateway over the text as it streams. Text that could
// still turn out to be the start of a stop sequence is held back, so neither a whole nor
// a partial stop sequence ever reaches the client.
//
//   StopFilter f({"\n\n", "END"});
//   auto out = f.feed(piece);   // out.text is safe to send; out.stopped → send STOP
//   out = f.flush();            // at the end: whatever was held back
#pragma once

#include <string>
#include <vector>

namespace inkling::gateway {

class StopFilter {
public:
    explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
    struct Out {
        std::string text;
        bool stopped = false;
    };
    Out feed(const std::string& piece);
    Out flush();  // end of generation without a match: release the held-back tail
    bool stopped() const { return stopped_; }
    // The sequence that matched ("" before one did): of those that start earliest, the
    // shortest (the one a stream completes first).
    const std::string& matched() const { return matched_; }

private:
    std::vector<std::string> stops_;
    std::string held_, matched_;
    bool stopped_ = false;
};

}  // namespace inkling::gateway
