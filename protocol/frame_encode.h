// The one encoder of the wire: a frame → the exact bytes it occupies on a pipe.
#pragma once

#include <string>

#include "protocol/frames.h"

namespace inkling::protocol {

std::string encode(const Frame& frame);

// The header line encode() writes first, LF excluded. Its length is what the reader's
// header limit applies to: a reader accepts a frame only when this fits (so every frame it
// yields re-encodes to bytes it reads back as the same frame).
std::string encode_header(const Frame& frame);

}  // namespace inkling::protocol
