// Every process that speaks the wire calls init_binary_stdio() before its first byte.
#pragma once

namespace inkling::protocol {

// Windows: stdin and stdout to _O_BINARY (text mode would turn LF into CRLF and break the
// sentinel) and both unbuffered. Everywhere: SIGPIPE ignored, so a vanished peer shows as
// an EPIPE write error that the caller handles, not as a silent death by signal.
void init_binary_stdio();

}  // namespace inkling::protocol
