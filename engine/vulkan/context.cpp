#include "engine/vulkan/context.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace inkling::vulkan {
namespace {

// Runs volkInitialize once; false when no Vulkan loader is installed.
bool loader_ready() {
    static const bool ok = volkInitialize() == VK_SUCCESS;
    return ok;
}

int rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 0;
    default: return 1;
    }
}

bool has_extension(VkPhysicalDevice pd, const char* name) {
    std::uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> all(n);
    vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, all.data());
    return std::any_of(all.begin(), all.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

DeviceInfo describe(VkPhysicalDevice pd, int index) {
    auto sub = make<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sub, {}};
    vkGetPhysicalDeviceProperties2(pd, &props);
    const auto& p = props.properties;
    DeviceInfo d;
    d.index = index;
    d.name = p.deviceName;
    d.type = p.deviceType;
    d.api_version = p.apiVersion;
    d.subgroup_size = sub.subgroupSize;
    d.max_storage_range = p.limits.maxStorageBufferRange;
    d.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
    d.shared_memory = p.limits.maxComputeSharedMemorySize;
    d.timestamp_ns = p.limits.timestampComputeAndGraphics ? p.limits.timestampPeriod : 0.0;
    d.subgroup_arithmetic = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    VkPhysicalDeviceFeatures features;
    vkGetPhysicalDeviceFeatures(pd, &features);
    d.float64 = features.shaderFloat64 == VK_TRUE;
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (std::uint32_t h = 0; h < mem.memoryHeapCount; ++h)
        if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            d.device_local_heap = std::max<std::uint64_t>(d.device_local_heap, mem.memoryHeaps[h].size);
    d.memory_budget = has_extension(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    return d;
}

// A short-lived instance for enumeration and the context's own.
VkInstance make_instance() {
    if (!loader_ready()) throw Unavailable("no Vulkan loader (libvulkan.so.1) on this system");
    auto app = make<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "inkling";
    app.apiVersion = VK_API_VERSION_1_2;
    auto ci = make<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ci.pApplicationInfo = &app;
    VkInstance instance = VK_NULL_HANDLE;
    const VkResult r = vkCreateInstance(&ci, nullptr, &instance);
    if (r != VK_SUCCESS) throw Unavailable("vkCreateInstance failed (VkResult " + std::to_string(r) + ")");
    volkLoadInstance(instance);
    return instance;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
    std::uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> all(n);
    vkEnumeratePhysicalDevices(instance, &n, all.data());
    return all;
}

}  // namespace

const char* DeviceInfo::type_name() const {
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

std::vector<DeviceInfo> list_devices() {
    VkInstance instance = make_instance();
    std::vector<DeviceInfo> out;
    int i = 0;
    for (VkPhysicalDevice pd : physical_devices(instance)) out.push_back(describe(pd, i++));
    vkDestroyInstance(instance, nullptr);
    return out;
}

std::unique_ptr<Context> Context::open(int index, std::uint64_t budget_bytes) {
    std::unique_ptr<Context> c(new Context());
    c->instance_ = make_instance();
    const auto devices = physical_devices(c->instance_);
    if (devices.empty()) throw Unavailable("the Vulkan loader reports no device");
    int chosen = -1;
    if (index >= 0) {
        if (index >= static_cast<int>(devices.size()))
            throw Unavailable("--vk-device " + std::to_string(index) + ": there are " +
                              std::to_string(devices.size()) + " devices (0.." + std::to_string(devices.size() - 1) +
                              ")");
        chosen = index;
    } else {
        int best = -1;
        for (int i = 0; i < static_cast<int>(devices.size()); ++i) {
            const int r = rank(describe(devices[i], i).type);
            if (r > best) best = r, chosen = i;
        }
    }
    c->physical_ = devices[chosen];
    c->info_ = describe(c->physical_, chosen);
    if (!c->info_.subgroup_arithmetic)
        throw Unavailable(c->info_.name + " lacks subgroup arithmetic in compute shaders");
    vkGetPhysicalDeviceMemoryProperties(c->physical_, &c->memory_);

    std::uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &nf, nullptr);
    std::vector<VkQueueFamilyProperties> families(nf);
    vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &nf, families.data());
    bool found = false;
    for (std::uint32_t f = 0; f < nf && !found; ++f)
        if (families[f].queueFlags & VK_QUEUE_COMPUTE_BIT) c->family_ = f, found = true;
    if (!found) throw Unavailable(c->info_.name + " has no compute queue");

    const float priority = 1.0f;
    auto q = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    q.queueFamilyIndex = c->family_;
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    std::vector<const char*> extensions;
    if (c->info_.memory_budget) extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    VkPhysicalDeviceFeatures enabled{};
    enabled.shaderFloat64 = c->info_.float64 ? VK_TRUE : VK_FALSE;
    auto ci = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    ci.pEnabledFeatures = &enabled;
    ci.queueCreateInfoCount = 1;
    ci.pQueueCreateInfos = &q;
    ci.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
    ci.ppEnabledExtensionNames = extensions.data();
    const VkResult r = vkCreateDevice(c->physical_, &ci, nullptr, &c->device_);
    if (r != VK_SUCCESS) throw Unavailable("vkCreateDevice failed on " + c->info_.name + " (VkResult " + std::to_string(r) + ")");
    volkLoadDevice(c->device_);
    vkGetDeviceQueue(c->device_, c->family_, 0, &c->queue_);
    c->forced_budget_ = budget_bytes;
    return c;
}

Context::~Context() {
    if (device_) {
        vkDeviceWaitIdle(device_);
        vkDestroyDevice(device_, nullptr);
    }
    if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::uint64_t Context::budget() const {
    if (forced_budget_) return forced_budget_;
    if (info_.memory_budget) {
        auto b = make<VkPhysicalDeviceMemoryBudgetPropertiesEXT>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT);
        VkPhysicalDeviceMemoryProperties2 p{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, &b, {}};
        vkGetPhysicalDeviceMemoryProperties2(physical_, &p);
        std::uint64_t best = 0;
        for (std::uint32_t h = 0; h < p.memoryProperties.memoryHeapCount; ++h)
            if (p.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
                best = std::max<std::uint64_t>(best, b.heapBudget[h] - std::min(b.heapBudget[h], b.heapUsage[h]) + used_);
        if (best) return best;
    }
    return info_.device_local_heap;
}

VkDeviceMemory Context::allocate(const VkMemoryRequirements& reqs, VkMemoryPropertyFlags required,
                                 VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags* got) {
    const bool device_local = (required | preferred) & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    if (device_local && used_ + reqs.size > budget()) {
        char what[160];
        std::snprintf(what, sizeof what, "device memory budget exceeded: a %.1f MiB buffer with %.1f of %.1f MiB in use",
                      static_cast<double>(reqs.size) / 1048576.0, static_cast<double>(used_) / 1048576.0,
                      static_cast<double>(budget()) / 1048576.0);
        throw OutOfBudget(what);
    }
    int pick = -1;
    for (int pass = 0; pass < 2 && pick < 0; ++pass) {
        const VkMemoryPropertyFlags want = pass == 0 ? (required | preferred) : required;
        for (std::uint32_t t = 0; t < memory_.memoryTypeCount; ++t)
            if ((reqs.memoryTypeBits & (1u << t)) && (memory_.memoryTypes[t].propertyFlags & want) == want) {
                pick = static_cast<int>(t);
                break;
            }
    }
    if (pick < 0) throw std::runtime_error("no Vulkan memory type with the flags a buffer needs");
    auto ai = make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    ai.allocationSize = reqs.size;
    ai.memoryTypeIndex = static_cast<std::uint32_t>(pick);
    VkDeviceMemory memory = VK_NULL_HANDLE;
    const VkResult r = vkAllocateMemory(device_, &ai, nullptr, &memory);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        throw OutOfBudget("the driver is out of memory for " + std::to_string(reqs.size >> 10) + " KiB");
    check(r, "vkAllocateMemory");
    if (got) *got = memory_.memoryTypes[pick].propertyFlags;
    // The books hold device memory only: a discrete GPU's staging and read-back buffers
    // live in the host's RAM and take nothing from the device's budget (on lavapipe and
    // unified-memory devices every type is device-local, so everything counts).
    if (memory_.memoryTypes[pick].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) used_ += reqs.size;
    peak_ = std::max(peak_, used_);
    return memory;
}

void Context::free(VkDeviceMemory memory, std::uint64_t bytes) {
    if (!memory) return;
    vkFreeMemory(device_, memory, nullptr);
    used_ -= std::min(used_, bytes);
}

void Context::check(VkResult r, const char* what) const {
    if (r == VK_SUCCESS) return;
    if (r == VK_ERROR_DEVICE_LOST) throw DeviceLost(std::string(what) + ": device lost (" + info_.name + ")");
    throw std::runtime_error(std::string(what) + " failed (VkResult " + std::to_string(r) + ")");
}

}  // namespace inkling::vulkan
