#include "protocol/binary_stdio.h"

#include <fcntl.h>
#include <io.h>

#include <cstdio>

namespace inkling::protocol {

// The CRT opens descriptors 0 and 1 in text mode: every LF written would go out as CR LF
// (the READY sentinel's included) and a CR LF read would come in as LF.
void init_binary_stdio() {
#ifndef INKLING_NEGATIVE_CONTROL_TEXT_STDIO  // only the test target echo-engine-text-stdio defines it
    _setmode(_fileno(stdin), _O_BINARY);
    _setmode(_fileno(stdout), _O_BINARY);
#endif
    std::setvbuf(stdin, nullptr, _IONBF, 0);
    std::setvbuf(stdout, nullptr, _IONBF, 0);
}

}  // namespace inkling::protocol
