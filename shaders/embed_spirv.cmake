# cmake -DSPV_FILES="a.spv;b.spv" -DOUT=shaders.cpp -P embed_spirv.cmake
# Writes a C++ file holding each compiled shader as uint32 words, looked up by the
# shader's name (engine/vulkan/kernel.h, shader_spirv).
set(body "// Generated from shaders/*.comp by embed_spirv.cmake; do not edit.\n#include \"engine/vulkan/kernel.h\"\n\n#include <stdexcept>\n\nnamespace inkling::vulkan {\nnamespace {\n")
set(table "")
foreach(spv ${SPV_FILES})
  get_filename_component(name ${spv} NAME_WE)
  file(READ ${spv} hex HEX)
  # SPIR-V words are little-endian: bytes b0 b1 b2 b3 make 0xb3b2b1b0.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])"
         "0x\\4\\3\\2\\1u," words "${hex}")
  string(APPEND body "const std::uint32_t spv_${name}[] = {${words}};\n")
  string(APPEND table "    if (name == \"${name}\") return spv_${name};\n")
endforeach()
string(APPEND body "}  // namespace\n\nstd::span<const std::uint32_t> shader_spirv(const std::string& name) {\n${table}")
string(APPEND body "    throw std::runtime_error(\"no embedded shader named \" + name);\n}\n\n}  // namespace inkling::vulkan\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
