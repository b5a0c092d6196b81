// A compute pipeline from SPIR-V embedded in the binary (shaders/*.comp, compiled by glslc
// at build time): `bindings` storage buffers at set 0, bindings 0..n-1, a push-constant
// block, and specialization constants (id i = value i) fixed when the pipeline is made.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/vulkan/context.h"

namespace inkling::vulkan {

// The SPIR-V of shaders/NAME.comp; throws std::runtime_error for an unknown name.
std::span<const std::uint32_t> shader_spirv(const std::string& name);

class Kernel {
public:
    Kernel(Context& ctx, const std::string& shader, std::uint32_t bindings, std::uint32_t push_bytes,
           std::vector<std::uint32_t> specialization = {});
    ~Kernel();
    Kernel(const Kernel&) = delete;
    Kernel& operator=(const Kernel&) = delete;

    VkPipeline pipeline() const { return pipeline_; }
    VkPipelineLayout layout() const { return layout_; }
    VkDescriptorSetLayout set_layout() const { return set_layout_; }
    std::uint32_t bindings() const { return bindings_; }
    std::uint32_t push_bytes() const { return push_bytes_; }
    const std::string& name() const { return name_; }

private:
    Context& ctx_;
    std::string name_;
    std::uint32_t bindings_, push_bytes_;
    VkShaderModule module_ = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace inkling::vulkan
