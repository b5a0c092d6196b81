// One device frame: dispatches (and copies) recorded into a command buffer, submitted
// once, waited for when the host needs the results. Each kernel's buffers are bound
// through a descriptor set taken from the frame's pool, reset when the frame begins.
//
// set_fault_at(n) fakes VK_ERROR_DEVICE_LOST at the n-th submit of the process, and every
// submit after it: the tests' device loss. The engine sets it at start-up from its
// --fault-vk-submit flag or INKLING_VK_FAULT (engine/options.cpp); device code reads no
// environment.
#pragma once

#include <cstdint>
#include <span>

#include "engine/vulkan/buffer.h"
#include "engine/vulkan/kernel.h"

namespace inkling::vulkan {

struct Binding {
    const Buffer* buffer;
    std::size_t offset = 0;
    std::size_t bytes = VK_WHOLE_SIZE;  // VK_WHOLE_SIZE: to the buffer's end
};

class Frame {
public:
    explicit Frame(Context& ctx);
    ~Frame();
    Frame(const Frame&) = delete;
    Frame& operator=(const Frame&) = delete;

    void begin();  // waits for the previous submit of this frame, if any
    void dispatch(const Kernel& k, std::span<const Binding> bindings, const void* push, std::uint32_t groups_x,
                  std::uint32_t groups_y = 1, std::uint32_t groups_z = 1);
    void copy(const Buffer& src, std::size_t src_offset, const Buffer& dst, std::size_t dst_offset, std::size_t bytes);
    // Several regions from src to dst in one command.
    void copy_regions(const Buffer& src, const Buffer& dst, std::span<const VkBufferCopy> regions);
    // Makes every earlier write (shader or copy) visible to every later read.
    void barrier();
    void submit();
    void wait();  // throws DeviceLost
    void run() { submit(), wait(); }
    bool recording() const { return recording_; }
    std::uint32_t dispatches() const { return dispatches_; }  // since begin()
    static constexpr std::uint32_t max_dispatches = 4096;     // one frame's descriptor sets

    // Submits the process made so far (the fault counter), and where the faked loss starts
    // (0, the start: never).
    static std::uint64_t submits();
    static void set_fault_at(std::uint64_t n);

private:
    Context& ctx_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cmd_ = VK_NULL_HANDLE;
    VkDescriptorPool descriptors_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    bool recording_ = false, pending_ = false;
    std::uint32_t dispatches_ = 0;
};

}  // namespace inkling::vulkan
