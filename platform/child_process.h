// A child process on pipes: its stdin and stdout are pipes held here, its stderr goes to
// a file, it inherits nothing else, and it runs in its own process group (a Ctrl-C meant
// for the parent must not reach it; the parent decides what the keypress means).
// POSIX: fork, setpgid, dup2, close-on-exec beyond stdio, execvp, waitpid. Windows:
// CreateProcess with CREATE_NEW_PROCESS_GROUP and an explicit inherited-handle list, the
// pipe ends as binary CRT descriptors, GetExitCodeProcess.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace inkling::platform {

struct ExitStatus {
    int code = 0;    // the exit status, when no signal ended it
    int signal = 0;  // the signal that ended it (POSIX), else 0
    bool exited_zero() const { return signal == 0 && code == 0; }
    // "exited with status 3", "was killed by signal 9 (out of memory? see dmesg)".
    std::string describe() const;
};

class ChildProcess {
public:
    // Starts argv[0] (searched on PATH) with argv; throws std::runtime_error when it cannot.
    // `stderr_path` is created (or emptied), private to its owner, never through a symlink.
    ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_path);
    ~ChildProcess();  // kills a child still running and reaps it
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    int stdin_fd() const { return in_fd_; }
    int stdout_fd() const { return out_fd_; }
    void close_stdin();
    long pid() const { return pid_; }

    // POSIX: kill(pid, sig). Windows: SIGINT and SIGTERM become a CTRL_BREAK_EVENT for the
    // child's process group (its stop request); any other signal terminates it.
    void signal(int sig);
    // The exit status once it has ended, without waiting.
    std::optional<ExitStatus> try_wait();
    // Kills it (SIGKILL / TerminateProcess) and reaps it.
    ExitStatus kill_and_wait();

private:
    long pid_ = -1;
    std::intptr_t handle_ = -1;  // Windows: the process HANDLE
    int in_fd_ = -1;
    int out_fd_ = -1;
    std::optional<ExitStatus> status_;
};

// Replaces this process by argv (POSIX: execv; Windows: runs it, waits, exits with its
// status). Returns only when it could not be started.
void replace_process(const std::vector<std::string>& argv);

}  // namespace inkling::platform
