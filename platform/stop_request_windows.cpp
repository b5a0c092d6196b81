#include "platform/stop_request.h"

#include <windows.h>

#include "platform/pipe_io.h"

namespace inkling::platform {
namespace {

StopHandler g_terminate = nullptr;
StopHandler g_interrupt = nullptr;

// Runs on a thread of its own that Windows starts for the event. TRUE: handled, the process
// goes on (for CTRL_CLOSE Windows ends it soon after, whatever we return).
BOOL WINAPI on_console_event(DWORD event) {
    const bool stop = event == CTRL_C_EVENT || event == CTRL_BREAK_EVENT;
    if (g_interrupt && stop) g_interrupt();
    if (g_terminate && (stop || event == CTRL_CLOSE_EVENT)) g_terminate();
    if (!g_interrupt && !g_terminate) return FALSE;
    interrupt_waits();
    return TRUE;
}

void install() {
    static const bool installed = SetConsoleCtrlHandler(on_console_event, TRUE) != 0;
    (void)installed;
}

}  // namespace

void on_terminate_request(StopHandler handler) {
    g_terminate = handler;
    install();
}

void on_interrupt(StopHandler handler) {
    g_interrupt = handler;
    install();
}

}  // namespace inkling::platform
