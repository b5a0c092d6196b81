#include "engine/convert/progress.h"

#include "platform/process.h"

#include <algorithm>

namespace inkling::convert {
namespace {

std::string megabytes(std::int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
    return buf;
}

std::string duration(double s) {
    char buf[32];
    const auto t = static_cast<long long>(s + 0.5);
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, t / 60 % 60);
    else std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
    return buf;
}

}  // namespace

Progress::Progress(std::int64_t total, std::int64_t done, std::FILE* out)
    : out_(out), tty_(platform::is_terminal(out)), total_(std::max<std::int64_t>(total, 1)), done_(done),
      start_done_(done), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double Progress::seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::line() const {
    const double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    const double secs = seconds();
    const double rate = secs > 0 ? static_cast<double>(done_ - start_done_) / secs : 0;
    const std::string eta = rate > 0 ? duration(static_cast<double>(total_ - done_) / rate) : "?";
    char buf[160];
    std::snprintf(buf, sizeof buf, "%3.0f%%  %s of %s  %.1f MB/s  ETA %s", 100 * frac, megabytes(done_).c_str(),
                  megabytes(total_).c_str(), rate / 1e6, eta.c_str());
    return buf;
}

void Progress::draw(bool final_line) {
    if (tty_) {
        constexpr int kWidth = 30;
        const int filled = static_cast<int>(kWidth * std::min(1.0, static_cast<double>(done_) / total_));
        const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                                std::string(static_cast<std::size_t>(kWidth - filled), '.');
        std::fprintf(out_, "\r[convert] [%s] %s\x1b[K%s", bar.c_str(), line().c_str(), final_line ? "\n" : "");
    } else {
        std::fprintf(out_, "[convert] %s\n", line().c_str());
    }
    std::fflush(out_);
}

void Progress::add(std::int64_t bytes) {
    done_ += bytes;
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
        if (now - last_draw_ < std::chrono::milliseconds(100)) return;
        last_draw_ = now;
        draw(false);
        return;
    }
    const int step = static_cast<int>(20 * static_cast<double>(done_) / static_cast<double>(total_));
    if (step > last_step_ && step < 20) {
        last_step_ = step;
        draw(false);
    }
}

void Progress::finish() { draw(true); }

}  // namespace inkling::convert
