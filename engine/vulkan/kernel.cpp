#include "engine/vulkan/kernel.h"

#include <vector>

namespace inkling::vulkan {

Kernel::Kernel(Context& ctx, const std::string& shader, std::uint32_t bindings, std::uint32_t push_bytes,
               std::vector<std::uint32_t> specialization)
    : ctx_(ctx), name_(shader), bindings_(bindings), push_bytes_(push_bytes) {
    const auto code = shader_spirv(shader);
    auto mi = make<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    mi.codeSize = code.size() * 4;
    mi.pCode = code.data();
    ctx.check(vkCreateShaderModule(ctx.device(), &mi, nullptr, &module_), "vkCreateShaderModule");

    std::vector<VkDescriptorSetLayoutBinding> b(bindings);
    for (std::uint32_t i = 0; i < bindings; ++i)
        b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    auto li = make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    li.bindingCount = bindings;
    li.pBindings = b.data();
    ctx.check(vkCreateDescriptorSetLayout(ctx.device(), &li, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");

    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    auto pl = make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &set_layout_;
    pl.pushConstantRangeCount = push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &range;
    ctx.check(vkCreatePipelineLayout(ctx.device(), &pl, nullptr, &layout_), "vkCreatePipelineLayout");

    std::vector<VkSpecializationMapEntry> entries(specialization.size());
    for (std::uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, 4 * i, 4};
    VkSpecializationInfo si{static_cast<std::uint32_t>(entries.size()), entries.data(), specialization.size() * 4,
                            specialization.data()};
    auto ci = make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    ci.stage = make<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module_;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = specialization.empty() ? nullptr : &si;
    ci.layout = layout_;
    ctx.check(vkCreateComputePipelines(ctx.device(), VK_NULL_HANDLE, 1, &ci, nullptr, &pipeline_),
              ("vkCreateComputePipelines (" + shader + ")").c_str());
}

Kernel::~Kernel() {
    VkDevice d = ctx_.device();
    if (pipeline_) vkDestroyPipeline(d, pipeline_, nullptr);
    if (layout_) vkDestroyPipelineLayout(d, layout_, nullptr);
    if (set_layout_) vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
    if (module_) vkDestroyShaderModule(d, module_, nullptr);
}

}  // namespace inkling::vulkan
