// Every process that speaks the wire calls init_binary_stdio() before its first byte.
#pragma once

namespace inkling::protocol {

// Windows: stdin and stdout to _O_BINARY (text mode would turn LF into CRLF and break the
// sentinel). Everywhere: stdin and stdout unbuffered (frames go out whole through write(2)
// anyway, and stdio must not hold bytes back from poll), and on POSIX SIGPIPE ignored, so
// a vanished peer shows as an EPIPE write error the caller handles, not a death by signal.
void init_binary_stdio();

}  // namespace inkling::protocol
