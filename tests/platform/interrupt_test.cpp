// platform::on_interrupt on POSIX: a Ctrl-C that arrives while the process is blocked
// writing to its terminal or a pipe must not make that write fail. coli prints the
// answer with std::cout; a write cut by SIGINT with EINTR put std::cout in a failed state
// for good, so the "stopped" footer and everything after it vanished and the next prompt
// came right after the ^C (a flake of tests/coli/coli_features_e2e.py).
#ifndef _WIN32
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "platform/stop_request.h"

namespace {

volatile sig_atomic_t g_seen = 0;
void count_interrupt() { g_seen = g_seen + 1; }

constexpr int kChunk = 4096;   // ≤ PIPE_BUF: a write of it blocks whole, with nothing moved
constexpr int kChunks = 64;    // 256 KiB, four times the default pipe buffer

// True once `pid` sleeps inside write(2) (syscall 1 on x86-64, 64 on aarch64).
bool blocked_in_write(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/syscall");
    std::string nr;
    f >> nr;
#if defined(__aarch64__)
    return nr == "64";
#else
    return nr == "1";
#endif
}

}  // namespace

TEST_CASE("a Ctrl-C during a blocked write to stdout loses no output and leaves std::cout usable") {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const int capacity = fcntl(fds[0], F_GETPIPE_SZ);
    REQUIRE(capacity > 0);
    std::fflush(nullptr);  // nothing of the parent's buffers may reach the pipe twice
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[1]);
        inkling::platform::on_interrupt(count_interrupt);
        const std::string chunk(kChunk, 'x');
        for (int i = 0; i < kChunks; ++i) std::cout << chunk << std::flush;
        std::cout << "end" << std::flush;
        // Exit status: 0 = all written and the handler ran; 1 = std::cout failed; 2 = no signal.
        std::_Exit(!std::cout.good() || std::ferror(stdout) ? 1 : g_seen == 1 ? 0 : 2);
    }
    close(fds[1]);
    // Wait until no chunk fits and the child sleeps in a write that has moved nothing.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool blocked = false;
    int queued = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        ioctl(fds[0], FIONREAD, &queued);
        if (queued > capacity - kChunk && blocked_in_write(child)) {
            blocked = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE_MESSAGE(blocked, "the child never blocked writing to the full pipe (" << queued << " of " << capacity
                                                                                 << " bytes queued)");
    REQUIRE(kill(child, SIGINT) == 0);
    std::string got;
    char buf[65536];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
        if (n < 0) {
            REQUIRE(errno == EINTR);
            continue;
        }
        got.append(buf, static_cast<std::size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK_MESSAGE(WEXITSTATUS(status) == 0, "child exit " << WEXITSTATUS(status) << " (1: std::cout failed, 2: no signal)");
    CHECK(got.size() == static_cast<std::size_t>(kChunk) * kChunks + 3);
    CHECK(got.ends_with("end"));
}
#endif
