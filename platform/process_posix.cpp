#include "platform/process.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

namespace inkling::platform {

std::filesystem::path executable_path() {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path() : self;
}

bool is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) != 0; }

bool stdin_is_terminal() { return ::isatty(STDIN_FILENO) != 0; }

void die_now() {
    ::kill(::getpid(), SIGKILL);
    std::abort();  // not reached
}

void ignore_broken_pipe_signal() { std::signal(SIGPIPE, SIG_IGN); }

void ignore_file_size_signal() { std::signal(SIGXFSZ, SIG_IGN); }

File create_private_file(std::string& path_template, int suffix_len) {
    const int fd = ::mkostemps(path_template.data(), suffix_len, O_CLOEXEC);  // O_EXCL, 0600
    return fd < 0 ? kNoFile : fd;
}

}  // namespace inkling::platform
