// The process itself: whether a stream is a terminal, dying at once (fault injection),
// ignoring SIGPIPE and SIGXFSZ where they exist, a fresh private temporary file.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include "platform/file_io.h"

namespace inkling::platform {

// This program's own file (/proc/self/exe; GetModuleFileNameW), empty when unknown.
std::filesystem::path executable_path();

bool is_terminal(std::FILE* stream);
bool stdin_is_terminal();
// Ends the process at once, as SIGKILL would (no handlers, no buffers flushed).
[[noreturn]] void die_now();
// POSIX: a write to a closed pipe, or past RLIMIT_FSIZE, becomes an error the caller sees
// (EPIPE, EFBIG) instead of a death by SIGPIPE or SIGXFSZ. Windows has neither signal.
void ignore_broken_pipe_signal();
void ignore_file_size_signal();
// Creates `path_template` with its "XXXXXX" (followed by `suffix_len` more characters)
// replaced: a new file (never an existing name or symlink), private to its owner, open for
// writing (platform/file_io.h's close_file closes it). kNoFile when it cannot.
File create_private_file(std::string& path_template, int suffix_len);

}  // namespace inkling::platform
