#include "platform/stop_request.h"

#include <csignal>

namespace inkling::platform {
namespace {

StopHandler g_terminate = nullptr;
StopHandler g_interrupt = nullptr;
void on_sigterm(int) { g_terminate(); }
void on_sigint(int) { g_interrupt(); }

// A termination request has no SA_RESTART: a blocking poll() or read() returns at once with
// EINTR. An interrupt (Ctrl-C) has it, because it arrives while the process writes to its
// terminal: a write cut with EINTR fails std::cout for good (coli lost its "stopped"
// footer and all later output). poll() returns EINTR either way (signal(7): never restarted),
// and the waits in platform/pipe_io.h are polls.
void install(int sig, void (*fn)(int), int flags) {
    struct sigaction sa {};
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigaction(sig, &sa, nullptr);
}

}  // namespace

void on_terminate_request(StopHandler handler) {
    g_terminate = handler;
    install(SIGTERM, on_sigterm, 0);
}

void on_interrupt(StopHandler handler) {
    g_interrupt = handler;
    install(SIGINT, on_sigint, SA_RESTART);
}

}  // namespace inkling::platform
