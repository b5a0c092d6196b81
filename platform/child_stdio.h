// What a spawned engine inherits: stdin, stdout and stderr, nothing else. Called in the
// child between fork and exec (by the gateway's supervisor and coli's EngineProcess):
// every other descriptor, the gateway's listening socket and client connections
// included, is marked close-on-exec, so a gateway killed while its engine runs does not
// leave the port bound by the engine.
//
//   if (fork() == 0) { dup2(...); platform::close_on_exec_beyond_stdio(); execvp(...); }
#pragma once

namespace inkling::platform {

// Async-signal-safe (no allocation): close_range(3, ~0, CLOSE_RANGE_CLOEXEC) where the
// kernel has it (5.11+), else fcntl(FD_CLOEXEC) on every descriptor below RLIMIT_NOFILE.
// Close-on-exec rather than closed, so a spawner's own exec-error pipe still works.
void close_on_exec_beyond_stdio() noexcept;

}  // namespace inkling::platform
