#include "engine/vulkan/buffer.h"

#include <atomic>
#include <cstring>
#include <utility>

#include "engine/vulkan/frame.h"

namespace inkling::vulkan {
namespace {
std::atomic<std::uint64_t> g_serials{0};
}  // namespace

Buffer::Buffer(Context& ctx, std::size_t bytes, Kind kind) : ctx_(&ctx), serial_(++g_serials), size_(bytes) {
    auto bi = make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    bi.size = bytes ? bytes : 4;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    ctx.check(vkCreateBuffer(ctx.device(), &bi, nullptr, &buffer_), "vkCreateBuffer");
    VkMemoryRequirements reqs;
    vkGetBufferMemoryRequirements(ctx.device(), buffer_, &reqs);
    VkMemoryPropertyFlags got = 0;
    try {
        if (kind == Kind::Device)
            memory_ = ctx.allocate(reqs, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                   VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &got);
        else
            memory_ = ctx.allocate(reqs, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                   VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, &got);
    } catch (...) {
        vkDestroyBuffer(ctx.device(), buffer_, nullptr);
        throw;
    }
    allocated_ = (got & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? reqs.size : 0;  // what the context's books hold
    ctx.check(vkBindBufferMemory(ctx.device(), buffer_, memory_, 0), "vkBindBufferMemory");
    if (got & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
        ctx.check(vkMapMemory(ctx.device(), memory_, 0, VK_WHOLE_SIZE, 0, &map_), "vkMapMemory");
        coherent_ = got & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    }
    fill_zero();
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
    std::swap(ctx_, o.ctx_);
    std::swap(buffer_, o.buffer_);
    std::swap(serial_, o.serial_);
    std::swap(memory_, o.memory_);
    std::swap(size_, o.size_);
    std::swap(allocated_, o.allocated_);
    std::swap(map_, o.map_);
    std::swap(coherent_, o.coherent_);
    return *this;
}

Buffer::~Buffer() {
    if (!ctx_) return;
    if (buffer_) vkDestroyBuffer(ctx_->device(), buffer_, nullptr);
    ctx_->free(memory_, allocated_);
}

void Buffer::flush() {
    if (!map_ || coherent_) return;
    VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, memory_, 0, VK_WHOLE_SIZE};
    ctx_->check(vkFlushMappedMemoryRanges(ctx_->device(), 1, &r), "vkFlushMappedMemoryRanges");
}

void Buffer::write(const void* src, std::size_t bytes, std::size_t offset) {
    if (bytes == 0) return;
    if (map_) {
        std::memcpy(static_cast<char*>(map_) + offset, src, bytes);
        flush();
        return;
    }
    Buffer staging(*ctx_, bytes, Kind::Host);
    staging.write(src, bytes);
    Frame f(*ctx_);
    f.begin();
    f.copy(staging, 0, *this, offset, bytes);
    f.run();
}

void Buffer::read(void* dst, std::size_t bytes, std::size_t offset) const {
    if (bytes == 0) return;
    if (map_) {
        if (!coherent_) {
            VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, memory_, 0, VK_WHOLE_SIZE};
            ctx_->check(vkInvalidateMappedMemoryRanges(ctx_->device(), 1, &r), "vkInvalidateMappedMemoryRanges");
        }
        std::memcpy(dst, static_cast<const char*>(map_) + offset, bytes);
        return;
    }
    Buffer staging(*ctx_, bytes, Kind::Host);
    Frame f(*ctx_);
    f.begin();
    f.copy(*this, offset, staging, 0, bytes);
    f.run();
    staging.read(dst, bytes);
}

void Buffer::fill_zero() {
    if (map_) {
        std::memset(map_, 0, size_);
        return;
    }
    std::vector<char> zeros(size_, 0);
    write(zeros.data(), size_);
}

}  // namespace inkling::vulkan
