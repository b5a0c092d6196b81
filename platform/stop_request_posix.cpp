#include "platform/stop_request.h"

#include <csignal>

namespace inkling::platform {
namespace {

StopHandler g_terminate = nullptr;
StopHandler g_interrupt = nullptr;
void on_sigterm(int) { g_terminate(); }
void on_sigint(int) { g_interrupt(); }

// No SA_RESTART: a blocking poll() or read() returns at once with EINTR.
void install(int sig, void (*fn)(int)) {
    struct sigaction sa {};
    sa.sa_handler = fn;
    sigaction(sig, &sa, nullptr);
}

}  // namespace

void on_terminate_request(StopHandler handler) {
    g_terminate = handler;
    install(SIGTERM, on_sigterm);
}

void on_interrupt(StopHandler handler) {
    g_interrupt = handler;
    install(SIGINT, on_sigint);
}

}  // namespace inkling::platform
