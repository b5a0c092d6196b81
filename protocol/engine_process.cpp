#include "protocol/engine_process.h"

#include "protocol/child_stdio.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace inkling::protocol {

using Clock = std::chrono::steady_clock;

EngineProcess::EngineProcess(const std::vector<std::string>& argv, std::string stderr_path)
    : stderr_path_(std::move(stderr_path)) {
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        // Its own process group: a Ctrl-C meant for the client (coli) must not kill the
        // engine; the client decides (STOP) what the keypress means.
        setpgid(0, 0);
        dup2(to_child[0], STDIN_FILENO);
        dup2(from_child[1], STDOUT_FILENO);
        // Never through a symlink, and private to its owner (the caller makes the file).
        int err = open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
        if (err >= 0) dup2(err, STDERR_FILENO);
        close_on_exec_beyond_stdio();
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_fd_ = to_child[1];
    out_fd_ = from_child[0];
}

EngineProcess::~EngineProcess() {
    close_stdin();
    if (out_fd_ >= 0) close(out_fd_);
    if (pid_ > 0 && !status_) {
        kill(pid_, SIGKILL);
        int st;
        waitpid(pid_, &st, 0);
    }
}

bool EngineProcess::write(std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::write(in_fd_, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

void EngineProcess::close_stdin() {
    if (in_fd_ >= 0) close(in_fd_);
    in_fd_ = -1;
}

void EngineProcess::signal(int sig) {
    if (pid_ > 0 && !status_) kill(pid_, sig);
}

bool EngineProcess::read_some(std::chrono::milliseconds timeout) {
    if (eof_) return false;
    pollfd p{out_fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(timeout.count()));
    if (r <= 0) return false;
    char buf[65536];
    ssize_t n = read(out_fd_, buf, sizeof buf);
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

std::optional<int> EngineProcess::wait_exit(std::chrono::milliseconds timeout) {
    if (status_) return status_;
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
        int st;
        pid_t r = waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            status_ = st;
            return status_;
        }
        // Keep the pipe drained so a chatty engine cannot block on a full stdout.
        if (!eof_) read_some(std::chrono::milliseconds(20));
        else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
    status_ = st;
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
