#include "engine/vulkan/frame.h"

#include <atomic>
#include <string>
#include <vector>

namespace inkling::vulkan {
namespace {

std::atomic<std::uint64_t> g_submits{0};

// set_fault_at(n): the n-th submit (1-based) and all after it report a lost device.
std::atomic<std::uint64_t> g_fault_at{0};
std::uint64_t fault_at() { return g_fault_at.load(); }

// Room for the cache plus one frame's worth of new sets.
constexpr std::uint32_t kSetsPerFrame = 4 * Frame::max_dispatches;
constexpr std::uint32_t kBindingsPerFrame = 12 * kSetsPerFrame;

}  // namespace

std::uint64_t Frame::submits() { return g_submits.load(); }
void Frame::set_fault_at(std::uint64_t n) { g_fault_at = n; }

Frame::Frame(Context& ctx) : ctx_(ctx) {
    VkDevice d = ctx.device();
    auto pi = make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = ctx.queue_family();
    ctx.check(vkCreateCommandPool(d, &pi, nullptr, &pool_), "vkCreateCommandPool");
    auto ai = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    ctx.check(vkAllocateCommandBuffers(d, &ai, &cmd_), "vkAllocateCommandBuffers");
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBindingsPerFrame};
    auto di = make<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    di.maxSets = kSetsPerFrame;
    di.poolSizeCount = 1;
    di.pPoolSizes = &size;
    ctx.check(vkCreateDescriptorPool(d, &di, nullptr, &descriptors_), "vkCreateDescriptorPool");
    auto fi = make<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    ctx.check(vkCreateFence(d, &fi, nullptr, &fence_), "vkCreateFence");
}

Frame::~Frame() {
    VkDevice d = ctx_.device();
    if (pending_) vkWaitForFences(d, 1, &fence_, VK_TRUE, UINT64_MAX);
    if (queries_) vkDestroyQueryPool(d, queries_, nullptr);
    vkDestroyFence(d, fence_, nullptr);
    vkDestroyDescriptorPool(d, descriptors_, nullptr);
    vkDestroyCommandPool(d, pool_, nullptr);
}

void Frame::begin() {
    if (pending_) wait();
    // The cached sets go when the pool is nearly full (only this frame's command buffer,
    // finished now, used them).
    if (sets_.size() + max_dispatches > kSetsPerFrame) {
        ctx_.check(vkResetDescriptorPool(ctx_.device(), descriptors_, 0), "vkResetDescriptorPool");
        sets_.clear();
    }
    ctx_.check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    ctx_.check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    recording_ = true;
    bound_ = VK_NULL_HANDLE;
    dispatches_ = barriers_ = 0;
    stamped_.clear();
    if (profile_) {
        vkCmdResetQueryPool(cmd_, queries_, 0, 2 * max_dispatches);
        stamp("");
    }
    // Whatever ran before this frame (earlier submits on the queue) counts as recorded:
    // the first barrier orders against it.
    since_barrier_ = copies_since_ = true;
}

void Frame::dispatch(const Kernel& k, std::span<const Binding> bindings, const void* push, std::uint32_t gx,
                     std::uint32_t gy, std::uint32_t gz) {
    if (bindings.size() != k.bindings())
        throw std::logic_error(k.name() + ": " + std::to_string(bindings.size()) + " buffers bound, the shader takes " +
                               std::to_string(k.bindings()));
    VkDescriptorSetLayout layout = k.set_layout();
    // The key in a buffer kept across dispatches: a decode step records hundreds, and a
    // fresh string each (past the small-string size) was an allocation each.
    std::string& key = key_;
    key.assign(reinterpret_cast<const char*>(&layout), sizeof layout);
    for (const Binding& b : bindings) {
        const std::uint64_t v[3] = {b.buffer->serial(), b.offset, b.bytes};
        key.append(reinterpret_cast<const char*>(v), sizeof v);
    }
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (auto it = sets_.find(key); it != sets_.end()) {
        set = it->second;
    } else {
        auto ai = make<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
        ai.descriptorPool = descriptors_;
        ai.descriptorSetCount = 1;
        ai.pSetLayouts = &layout;
        ctx_.check(vkAllocateDescriptorSets(ctx_.device(), &ai, &set),
                   "vkAllocateDescriptorSets (too many dispatches in one frame?)");
        std::vector<VkDescriptorBufferInfo> infos(bindings.size());
        std::vector<VkWriteDescriptorSet> writes(bindings.size());
        for (std::size_t i = 0; i < bindings.size(); ++i) {
            infos[i] = {bindings[i].buffer->handle(), bindings[i].offset, bindings[i].bytes};
            writes[i] = make<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
            writes[i].dstSet = set;
            writes[i].dstBinding = static_cast<std::uint32_t>(i);
            writes[i].descriptorCount = 1;
            writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
            writes[i].pBufferInfo = &infos[i];
        }
        vkUpdateDescriptorSets(ctx_.device(), static_cast<std::uint32_t>(writes.size()), writes.data(), 0, nullptr);
        sets_.emplace(key, set);
    }
    if (k.pipeline() != bound_) {  // consecutive dispatches of one kernel bind it once
        vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline());
        bound_ = k.pipeline();
    }
    vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout(), 0, 1, &set, 0, nullptr);
    if (k.push_bytes()) vkCmdPushConstants(cmd_, k.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes(), push);
    vkCmdDispatch(cmd_, gx, gy, gz);
    ++dispatches_;
    since_barrier_ = true;
    if (profile_) stamp(k.name());
}

void Frame::copy(const Buffer& src, std::size_t src_offset, const Buffer& dst, std::size_t dst_offset,
                 std::size_t bytes) {
    VkBufferCopy region{src_offset, dst_offset, bytes};
    vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), 1, &region);
    copies_since_ = true;
    if (profile_) stamp("copy");
}

void Frame::copy_regions(const Buffer& src, const Buffer& dst, std::span<const VkBufferCopy> regions) {
    if (regions.empty()) return;
    vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), static_cast<std::uint32_t>(regions.size()), regions.data());
    copies_since_ = true;
}

void Frame::set_profile(Profile* p) {
    if (p && !queries_ && ctx_.info().timestamp_ns > 0) {
        auto qi = make<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
        qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qi.queryCount = 2 * max_dispatches;
        ctx_.check(vkCreateQueryPool(ctx_.device(), &qi, nullptr, &queries_), "vkCreateQueryPool");
    }
    profile_ = queries_ ? p : nullptr;
}

void Frame::stamp(const std::string& what) {
    const auto n = static_cast<std::uint32_t>(stamped_.size());
    if (n >= 2 * max_dispatches) return;
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, n);
    stamped_.push_back(what);
}

void Frame::barrier() {
    // Compute to compute alone when no copy was recorded since the last barrier (the
    // cheaper dependency on GPUs whose copies take another path); with one, transfers too.
    // A barrier straight after another orders nothing new and is skipped.
    if (!since_barrier_ && !copies_since_) return;
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | (copies_since_ ? VK_ACCESS_TRANSFER_WRITE_BIT : 0);
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags src =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | (copies_since_ ? VK_PIPELINE_STAGE_TRANSFER_BIT : 0);
    const VkPipelineStageFlags dst = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(cmd_, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
    since_barrier_ = copies_since_ = false;
    ++barriers_;
}

void Frame::submit() {
    // Results the host reads after wait() must be visible to it.
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    ctx_.check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
    recording_ = false;
    const std::uint64_t n = ++g_submits;
    if (fault_at() && n >= fault_at()) ctx_.check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit (INKLING_VK_FAULT)");
    ctx_.check(vkResetFences(ctx_.device(), 1, &fence_), "vkResetFences");
    auto si = make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    {
        std::lock_guard lock(ctx_.queue_mutex());
        ctx_.check(vkQueueSubmit(ctx_.queue(), 1, &si, fence_), "vkQueueSubmit");
    }
    pending_ = true;
}

bool Frame::running() const {
    if (!pending_) return false;
    const VkResult r = vkGetFenceStatus(ctx_.device(), fence_);
    if (r == VK_NOT_READY) return true;
    ctx_.check(r, "vkGetFenceStatus");
    return false;
}

void Frame::wait() {
    if (!pending_) return;
    pending_ = false;
    ctx_.check(vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    if (!profile_ || stamped_.size() < 2) return;
    std::vector<std::uint64_t> t(stamped_.size());
    ctx_.check(vkGetQueryPoolResults(ctx_.device(), queries_, 0, static_cast<std::uint32_t>(t.size()),
                                     t.size() * 8, t.data(), 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
               "vkGetQueryPoolResults");
    for (std::size_t i = 1; i < t.size(); ++i) {
        auto& e = profile_->ns_and_count[stamped_[i]];
        e.first += static_cast<double>(t[i] - t[i - 1]) * ctx_.info().timestamp_ns;
        ++e.second;
    }
}

}  // namespace inkling::vulkan
