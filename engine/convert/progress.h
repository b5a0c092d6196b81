// Progress of a conversion on stderr: on a terminal one line redrawn in place (bar, bytes
// done of total, MB/s, ETA); otherwise (a log, a pipe) a plain line every 5 %.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace inkling::convert {

class Progress {
public:
    // `done` bytes count as already converted (a resumed run); the rate counts only this run's.
    Progress(std::int64_t total, std::int64_t done, std::FILE* out = stderr);
    void add(std::int64_t bytes);
    void finish();
    double seconds() const;
    std::int64_t bytes_this_run() const { return done_ - start_done_; }

private:
    void draw(bool final_line);
    std::string line() const;
    std::FILE* out_;
    bool tty_;
    std::int64_t total_, done_, start_done_;
    int last_step_ = -1;  // non-tty: last 5 % step printed
    std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace inkling::convert
