#include "protocol/frame_writer.h"

#include "platform/pipe_io.h"
#include "protocol/frame_encode.h"

namespace inkling::protocol {

bool FrameWriter::write(const Frame& frame) { return write_raw(encode(frame)); }

bool FrameWriter::write_raw(std::string_view bytes) {
    std::lock_guard lock(mutex_);
    return write_locked(bytes);
}

bool FrameWriter::write_locked(std::string_view bytes) {
    if (!error_.empty()) return false;
    return platform::write_all_fd(fd_, bytes.data(), bytes.size(), error_);
}

}  // namespace inkling::protocol
