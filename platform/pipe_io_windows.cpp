#include "platform/pipe_io.h"

#include <windows.h>
#include <io.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace inkling::platform {
namespace {

std::atomic<unsigned> g_interrupts{0};

// Windows cannot wait with a timeout for an anonymous pipe to become readable: such pipes
// take no overlapped I/O, their handles are never waited on, and PeekNamedPipe, the usual
// way round, fails (ERROR_NOT_SUPPORTED) under Wine when the pipe is a host one. So each
// pipe or console descriptor read through here gets a reader thread that blocks in _read
// and queues what comes; waiting for it is waiting on a condition variable, as libuv does.
struct Reader {
    std::mutex mutex;
    std::condition_variable changed;
    std::string bytes;
    bool ended = false;  // _read returned 0 or an error: ended after the queued bytes
    int error = 0;
};

std::mutex g_readers_mutex;
std::map<int, std::shared_ptr<Reader>> g_readers;

bool needs_reader(int fd) {
    HANDLE h = reinterpret_cast<HANDLE>(_get_osfhandle(fd));
    if (h == INVALID_HANDLE_VALUE) return false;
    const DWORD type = GetFileType(h);
    return type == FILE_TYPE_PIPE || type == FILE_TYPE_CHAR;
}

std::shared_ptr<Reader> reader_of(int fd) {
    std::lock_guard lock(g_readers_mutex);
    auto it = g_readers.find(fd);
    if (it != g_readers.end()) return it->second;
    if (!needs_reader(fd)) return nullptr;
    auto r = std::make_shared<Reader>();
    g_readers[fd] = r;
    std::thread([fd, r] {
        char buf[65536];
        while (true) {
            const int n = _read(fd, buf, sizeof buf);
            const int err = errno;
            std::lock_guard l(r->mutex);
            if (n > 0) {
                r->bytes.append(buf, static_cast<std::size_t>(n));
            } else {
                r->ended = true;
                // The CRT reports a pipe whose writer is gone as EPIPE: that is its end.
                r->error = n < 0 && err != EPIPE ? err : 0;
            }
            r->changed.notify_all();
            if (n <= 0) return;
        }
    }).detach();  // ends at the end of its input (stdin's at process exit)
    return r;
}

}  // namespace

Wait wait_readable(int fd, int timeout_ms) {
    auto r = reader_of(fd);
    if (!r) return Wait::Ready;  // a file: a read never waits, as poll says
    const unsigned interrupts = g_interrupts.load();
    std::unique_lock lock(r->mutex);
    auto ready = [&] { return !r->bytes.empty() || r->ended || g_interrupts.load() != interrupts; };
    if (timeout_ms < 0) {
        // interrupt_waits() cannot notify from a console handler's thread without the lock
        // (it may be held here), so a wait without limit still looks up every 50 ms.
        while (!ready()) r->changed.wait_for(lock, std::chrono::milliseconds(50));
    } else {
        r->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
    }
    return !r->bytes.empty() || r->ended ? Wait::Ready : Wait::Timeout;
}

void interrupt_waits() noexcept { g_interrupts.fetch_add(1); }

std::int64_t read_fd(int fd, void* buf, std::size_t bytes) {
    auto r = reader_of(fd);
    if (!r) {
        const int n = _read(fd, buf, bytes > 0x40000000u ? 0x40000000u : static_cast<unsigned>(bytes));
        return n < 0 && errno == EPIPE ? 0 : n;
    }
    std::unique_lock lock(r->mutex);
    r->changed.wait(lock, [&] { return !r->bytes.empty() || r->ended; });
    if (r->bytes.empty()) {
        if (r->error == 0) return 0;
        errno = r->error;
        return -1;
    }
    const std::size_t n = std::min(bytes, r->bytes.size());
    std::memcpy(buf, r->bytes.data(), n);
    r->bytes.erase(0, n);
    return static_cast<std::int64_t>(n);
}

void forget_fd(int fd, int wait_ms) {
    std::shared_ptr<Reader> r;
    {
        std::lock_guard lock(g_readers_mutex);
        auto it = g_readers.find(fd);
        if (it == g_readers.end()) return;
        r = it->second;
        g_readers.erase(it);
    }
    std::unique_lock lock(r->mutex);
    r->changed.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return r->ended; });
}

bool write_all_fd(int fd, const void* buf, std::size_t bytes, std::string& error) {
    const char* p = static_cast<const char*>(buf);
    while (bytes > 0) {
        const int n = _write(fd, p, bytes > 0x40000000u ? 0x40000000u : static_cast<unsigned>(bytes));
        if (n > 0) {
            p += n;
            bytes -= static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        error = n == 0 ? "write returned 0" : std::strerror(errno);
        if (n < 0 && errno == EPIPE) error = "peer closed the pipe (EPIPE)";
        return false;
    }
    return true;
}

}  // namespace inkling::platform
