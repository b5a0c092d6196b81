// The Vulkan device the engine computes on: the loader opened at run time (volk), so a
// binary without libvulkan or without a device still runs on the CPU; the device chosen
// by rank (discrete > integrated > virtual > other > CPU driver such as lavapipe) or by
// index; one compute queue; memory books (what we allocated, against a budget from
// VK_EXT_memory_budget, the device-local heap, or a forced figure for tests).
#pragma once

#include <volk.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace inkling::vulkan {

// A Vulkan struct zeroed but for its sType.
template <class T>
T make(VkStructureType type) {
    T v{};
    v.sType = type;
    return v;
}

// No loader, no device, or a device without what the shaders need. The message says why.
struct Unavailable : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// An allocation past the memory budget (the forced one, or the driver's).
struct OutOfBudget : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// VK_ERROR_DEVICE_LOST from a submit or a wait (real or faked by INKLING_VK_FAULT).
struct DeviceLost : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct DeviceInfo {
    int index = -1;  // in the loader's enumeration order (what vulkaninfo lists)
    std::string name;
    VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
    std::uint32_t api_version = 0;
    std::uint32_t subgroup_size = 0;
    std::uint64_t max_storage_range = 0;      // bytes one storage-buffer binding may span
    std::uint32_t max_workgroup_invocations = 0;
    std::uint64_t shared_memory = 0;
    double timestamp_ns = 0;                  // one timestamp tick (0: no compute timestamps)
    std::uint64_t device_local_heap = 0;      // largest device-local heap
    bool memory_budget = false;               // VK_EXT_memory_budget present
    bool subgroup_arithmetic = false;
    bool float64 = false;                     // shaderFloat64 (the integer expert shaders' exact f32 steps)

    const char* type_name() const;  // "discrete", "integrated", "virtual", "cpu", "other"
    bool is_cpu() const { return type == VK_PHYSICAL_DEVICE_TYPE_CPU; }
};

// Every device the loader reports, in its order. Throws Unavailable without a loader.
std::vector<DeviceInfo> list_devices();

class Context {
public:
    // Opens the device `index` (-1: the best ranked). `budget_bytes` > 0 forces the budget
    // (tests make lavapipe behave like a small card). Throws Unavailable.
    static std::unique_ptr<Context> open(int index = -1, std::uint64_t budget_bytes = 0);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    const DeviceInfo& info() const { return info_; }
    VkDevice device() const { return device_; }
    VkQueue queue() const { return queue_; }
    std::uint32_t queue_family() const { return family_; }

    // Memory books. budget(): the forced figure, else VK_EXT_memory_budget's device-local
    // budget, else the device-local heap. used(): bytes of device-local memory this context holds.
    std::uint64_t budget() const;
    std::uint64_t used() const { return used_; }
    std::uint64_t peak() const { return peak_; }

    // Allocates memory of a type with `required` flags (and `preferred` ones when such a
    // type exists) for `reqs`; counts it in the books. Throws std::runtime_error past the
    // budget (OutOfBudget) or when the driver refuses.
    VkDeviceMemory allocate(const VkMemoryRequirements& reqs, VkMemoryPropertyFlags required,
                            VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags* got = nullptr);
    void free(VkDeviceMemory memory, std::uint64_t bytes);

    // Throws DeviceLost for VK_ERROR_DEVICE_LOST, std::runtime_error naming `what` for
    // any other failure.
    void check(VkResult r, const char* what) const;

    std::mutex& queue_mutex() { return queue_mutex_; }

private:
    Context() = default;
    VkInstance instance_ = VK_NULL_HANDLE;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    std::uint32_t family_ = 0;
    DeviceInfo info_;
    VkPhysicalDeviceMemoryProperties memory_{};
    std::uint64_t forced_budget_ = 0;
    std::uint64_t used_ = 0, peak_ = 0;
    std::mutex queue_mutex_;
};

}  // namespace inkling::vulkan
