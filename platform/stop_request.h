// What the user or a supervisor sends to stop a process, delivered to a plain handler that
// only sets a flag (it may run in a signal handler or on another thread). Waits in
// platform/pipe_io.h return early when one arrives.
//   on_terminate_request: POSIX SIGTERM. Windows: CTRL_C, CTRL_BREAK and CTRL_CLOSE
//     (GenerateConsoleCtrlEvent from a parent, Ctrl-C in a console; Wine turns a SIGINT
//     into CTRL_C), which Windows has instead of a termination signal.
//   on_interrupt: POSIX SIGINT. Windows: CTRL_C and CTRL_BREAK.
#pragma once

namespace inkling::platform {

using StopHandler = void (*)();
void on_terminate_request(StopHandler handler);
void on_interrupt(StopHandler handler);

}  // namespace inkling::platform
