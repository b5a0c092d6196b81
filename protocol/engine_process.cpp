#include "protocol/engine_process.h"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "platform/pipe_io.h"

namespace inkling::protocol {

using Clock = std::chrono::steady_clock;

EngineProcess::EngineProcess(const std::vector<std::string>& argv, std::string stderr_path)
    : stderr_path_(std::move(stderr_path)), child_(argv, stderr_path_) {}

EngineProcess::~EngineProcess() = default;

bool EngineProcess::write(std::string_view bytes) {
    if (child_.stdin_fd() < 0) return false;
    std::string error;
    return platform::write_all_fd(child_.stdin_fd(), bytes.data(), bytes.size(), error);
}

void EngineProcess::close_stdin() { child_.close_stdin(); }

void EngineProcess::signal(int sig) { child_.signal(sig); }

bool EngineProcess::read_some(std::chrono::milliseconds timeout) {
    if (eof_) return false;
    if (platform::wait_readable(child_.stdout_fd(), static_cast<int>(timeout.count())) == platform::Wait::Timeout)
        return false;
    char buf[65536];
    const std::int64_t n = platform::read_fd(child_.stdout_fd(), buf, sizeof buf);
    if (n == -2) return false;
    if (n <= 0) {
        eof_ = true;
        reader_.finish();
        return true;
    }
    if (keep_raw_) raw_.append(buf, static_cast<std::size_t>(n));
    reader_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    return true;
}

std::optional<ReadItem> EngineProcess::next(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (true) {
        if (auto item = reader_.next()) return item;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (eof_ || left.count() <= 0) return std::nullopt;
        read_some(left);
    }
}

bool EngineProcess::drain_to_eof(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!eof_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        read_some(left);
    }
    return true;
}

std::optional<platform::ExitStatus> EngineProcess::wait_exit(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (true) {
        if (auto status = child_.try_wait()) return status;
        if (Clock::now() >= deadline) break;
        // Keep the pipe drained so a chatty engine cannot block on a full stdout.
        if (!eof_) read_some(std::chrono::milliseconds(20));
        else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    child_.kill_and_wait();
    return std::nullopt;
}

std::string EngineProcess::stderr_tail(std::size_t lines) const {
    std::ifstream in(stderr_path_);
    std::vector<std::string> all;
    for (std::string line; std::getline(in, line);) all.push_back(line);
    std::ostringstream out;
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
        out << "    | " << all[i] << "\n";
    return out.str();
}

}  // namespace inkling::protocol
