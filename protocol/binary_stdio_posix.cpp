#include "protocol/binary_stdio.h"

#include <cstdio>

#include "platform/process.h"

namespace inkling::protocol {

// POSIX stdio has no text mode: only the buffering and SIGPIPE to see to.
void init_binary_stdio() {
    platform::ignore_broken_pipe_signal();
    std::setvbuf(stdin, nullptr, _IONBF, 0);
    std::setvbuf(stdout, nullptr, _IONBF, 0);
}

}  // namespace inkling::protocol
