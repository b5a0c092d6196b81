// Storage buffers on a Context. Device buffers live in device-local memory (host-visible
// when the device offers it, as lavapipe and ReBAR cards do; else written through a
// staging copy); Host buffers are host-visible and mapped, for what the host writes each
// frame and what it reads back.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/vulkan/context.h"

namespace inkling::vulkan {

class Buffer {
public:
    enum class Kind { Device, Host };
    Buffer() = default;
    Buffer(Context& ctx, std::size_t bytes, Kind kind);
    ~Buffer();
    Buffer(Buffer&& o) noexcept { *this = std::move(o); }
    Buffer& operator=(Buffer&& o) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    VkBuffer handle() const { return buffer_; }
    // Unique over the process's buffers (a handle value can come back for a new buffer):
    // what the frames' descriptor-set cache keys on.
    std::uint64_t serial() const { return serial_; }
    std::size_t size() const { return size_; }
    bool mapped() const { return map_ != nullptr; }
    void* data() const { return map_; }  // host-visible buffers only

    // Host → buffer and back; through a staging copy when the memory isn't mappable.
    // Synchronous. Throws DeviceLost.
    void write(const void* src, std::size_t bytes, std::size_t offset = 0);
    void read(void* dst, std::size_t bytes, std::size_t offset = 0) const;
    void fill_zero();
    // After writing through data(): makes the writes visible to the device (a no-op on
    // coherent memory).
    void flush();

private:
    Context* ctx_ = nullptr;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    std::uint64_t serial_ = 0;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    std::size_t size_ = 0, allocated_ = 0;
    void* map_ = nullptr;
    bool coherent_ = true;
};

}  // namespace inkling::vulkan
