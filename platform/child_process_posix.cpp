#include "platform/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "platform/child_stdio.h"

namespace inkling::platform {

std::string ExitStatus::describe() const {
    if (signal == 0) return "exited with status " + std::to_string(code);
    std::string s = "was killed by signal " + std::to_string(signal);
    if (signal == SIGKILL) s += " (out of memory? see dmesg)";
    return s;
}

namespace {

ExitStatus from_wait_status(int st) {
    if (WIFSIGNALED(st)) return {0, WTERMSIG(st)};
    return {WEXITSTATUS(st), 0};
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_path) {
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
    if (pipe2(from_child, O_CLOEXEC) != 0) {
        ::close(to_child[0]);
        ::close(to_child[1]);
        throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
    }
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        dup2(to_child[0], STDIN_FILENO);
        dup2(from_child[1], STDOUT_FILENO);
        int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
        if (err >= 0) dup2(err, STDERR_FILENO);
        close_on_exec_beyond_stdio();
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    pid_ = pid;
    in_fd_ = to_child[1];
    out_fd_ = from_child[0];
}

ChildProcess::~ChildProcess() {
    close_stdin();
    if (out_fd_ >= 0) ::close(out_fd_);
    if (pid_ > 0 && !status_) kill_and_wait();
}

void ChildProcess::close_stdin() {
    if (in_fd_ >= 0) ::close(in_fd_);
    in_fd_ = -1;
}

void ChildProcess::signal(int sig) {
    if (pid_ > 0 && !status_) ::kill(static_cast<pid_t>(pid_), sig);
}

std::optional<ExitStatus> ChildProcess::try_wait() {
    if (status_) return status_;
    int st = 0;
    if (waitpid(static_cast<pid_t>(pid_), &st, WNOHANG) == static_cast<pid_t>(pid_)) status_ = from_wait_status(st);
    return status_;
}

ExitStatus ChildProcess::kill_and_wait() {
    if (status_) return *status_;
    ::kill(static_cast<pid_t>(pid_), SIGKILL);
    int st = 0;
    waitpid(static_cast<pid_t>(pid_), &st, 0);
    status_ = from_wait_status(st);
    return *status_;
}

void replace_process(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
}

}  // namespace inkling::platform
