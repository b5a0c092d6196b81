// The one encoder of the wire: a frame → the exact bytes it occupies on a pipe.
#pragma once

#include <string>

#include "protocol/frames.h"

namespace inkling::protocol {

std::string encode(const Frame& frame);

}  // namespace inkling::protocol
