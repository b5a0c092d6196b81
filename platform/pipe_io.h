// The wire's byte moves on a descriptor (a pipe, a file, a terminal): wait with a timeout
// until a read will not block, read what is there, write all of it. POSIX: poll, read,
// write. Windows (CRT descriptors): a reader thread per pipe, _read, _write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace inkling::platform {

enum class Wait { Ready, Timeout };
// Ready when a read_fd will not block (data, end of input or an error to read); Timeout
// after `timeout_ms` (-1: no limit), or early when interrupt_waits() was called meanwhile
// (POSIX: a signal's EINTR), so a stop request is seen at once.
Wait wait_readable(int fd, int timeout_ms);
// Wakes the waits in progress (called from a stop handler; async-signal-safe).
void interrupt_waits() noexcept;
// Before closing a descriptor read through here: Windows lets its reader thread see the end
// of input (up to `wait_ms`) and drops it; POSIX has nothing to drop.
void forget_fd(int fd, int wait_ms);

// Bytes read, 0 at the end of input, -1 on an error (retryable ones, EINTR/EAGAIN, -2).
std::int64_t read_fd(int fd, void* buf, std::size_t bytes);
// Writes all of `bytes`; false on an error (the peer gone: error text says so).
bool write_all_fd(int fd, const void* buf, std::size_t bytes, std::string& error);

}  // namespace inkling::platform
