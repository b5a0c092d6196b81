// One device frame: dispatches (and copies) recorded into a command buffer, submitted
// once, waited for when the host needs the results. Each kernel's buffers are bound
// through a descriptor set; a set for the same kernel layout and the same buffer ranges is
// made once and kept across begin()s (a decode step binds the same buffers every time, and
// writing hundreds of sets a step costs the host more than the device's work), the cache
// starting over when its pool fills.
//
// set_fault_at(n) fakes VK_ERROR_DEVICE_LOST at the n-th submit of the process, and every
// submit after it: the tests' device loss. The engine sets it at start-up from its
// --fault-vk-submit flag or INKLING_VK_FAULT (engine/options.cpp); device code reads no
// environment.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

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
    // Submitted and not finished on the device yet (a look at the fence, no wait).
    bool running() const;
    std::uint32_t dispatches() const { return dispatches_; }  // since begin()
    std::uint32_t barriers() const { return barriers_; }      // since begin(), recorded
    static constexpr std::uint32_t max_dispatches = 4096;     // one frame's descriptor sets

    // Profiling: with a table set, a timestamp follows every dispatch and copy, and wait()
    // adds each command's device time (from the previous timestamp: its barrier's wait
    // included) to the table under its kernel's name. For benchmarks (`bench --vk-profile`).
    struct Profile {
        std::unordered_map<std::string, std::pair<double, std::uint64_t>> ns_and_count;
    };
    void set_profile(Profile* p);

    // Submits the process made so far (the fault counter), and where the faked loss starts
    // (0, the start: never).
    static std::uint64_t submits();
    static void set_fault_at(std::uint64_t n);

private:
    Context& ctx_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cmd_ = VK_NULL_HANDLE;
    VkDescriptorPool descriptors_ = VK_NULL_HANDLE;  // sets kept across begin()s
    std::unordered_map<std::string, VkDescriptorSet> sets_;  // layout + buffer ranges → set
    std::string key_;                            // dispatch()'s key, its storage reused
    VkPipeline bound_ = VK_NULL_HANDLE;          // the pipeline bound last in this recording
    Profile* profile_ = nullptr;
    VkQueryPool queries_ = VK_NULL_HANDLE;
    std::vector<std::string> stamped_;  // the command before each timestamp after the first
    void stamp(const std::string& what);
    VkFence fence_ = VK_NULL_HANDLE;
    bool recording_ = false, pending_ = false;
    std::uint32_t dispatches_ = 0, barriers_ = 0;
    bool since_barrier_ = false, copies_since_ = false;  // recorded since the last barrier
};

}  // namespace inkling::vulkan
