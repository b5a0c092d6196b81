# The project's settings for ARM64 (the cross build of `make arm64`, cmake/aarch64-linux-gnu.cmake,
# or a native ARM64 build). Included by the top-level CMakeLists.txt.
#
# The whole build targets INKLING_ARCH when it is given (`make arm64 ARCH=...`: an -march value
# such as armv8.2-a+dotprod, or an -mcpu value such as neoverse-n1 or native), else the
# compiler's default (armv8-a: NEON, which every ARM64 CPU has). The integer kernels' faster
# versions (engine/cpu/arm64/) need the dot-product (SDOT, FEAT_DotProd) and int8 matrix-multiply
# (SMMLA, FEAT_I8MM) instructions; the engine picks among the versions at run time from what the
# CPU reports (getauxval), so each is compiled with what it needs, function by function
# (__attribute__((target))), and only those are:
#   1. where the target architecture already defines the feature (__ARM_FEATURE_DOTPROD,
#      __ARM_FEATURE_MATMUL_INT8), nothing is added;
#   2. otherwise the `+dotprod` / `+i8mm` modifier on top of it, where the compiler takes that;
#   3. otherwise `arch=armv8.2-a+dotprod[+i8mm]`, where the compiler takes that;
#   4. otherwise the version is left out, with a warning (the NEON and scalar ones remain).
# (The system this one learns from built with -march=native, which an older gcc quietly turned
# into plain armv8-a there: its int8/int4 kernels were compiled out and nothing said so.)
include(CheckCXXSourceCompiles)
set(INKLING_ARCH "" CACHE STRING "ARM64 target: an -march value (armv8...) or an -mcpu value (a CPU name, native)")
set(arm64_base "")
if(INKLING_ARCH MATCHES "^armv")
  set(arm64_base "-march=${INKLING_ARCH}")
elseif(INKLING_ARCH)
  set(arm64_base "-mcpu=${INKLING_ARCH}")
endif()
if(arm64_base)
  set(CMAKE_REQUIRED_FLAGS "${arm64_base}")
  set(CMAKE_REQUIRED_QUIET ON)
  check_cxx_source_compiles("int main() { return 0; }" INKLING_ARM64_BASE_OK)
  unset(CMAKE_REQUIRED_FLAGS)
  if(NOT INKLING_ARM64_BASE_OK)
    message(FATAL_ERROR "ARM64: ${CMAKE_CXX_COMPILER} does not take ${arm64_base} (from INKLING_ARCH / make ARCH=; "
                        "a cross compiler knows no 'native')")
  endif()
  add_compile_options(${arm64_base})
endif()

# inkling_arm64_feature(NAME MACRO MODIFIER ARCH_FALLBACK BODY): sets INKLING_ARM64_<NAME> to
# "base" (the target defines MACRO), to the target attribute string that compiles BODY, or to
# "" (neither).
function(inkling_arm64_feature name macro modifier fallback body)
  set(CMAKE_REQUIRED_FLAGS "${arm64_base}")
  set(CMAKE_REQUIRED_QUIET ON)
  check_cxx_source_compiles("#ifndef ${macro}\n#error no ${macro}\n#endif\nint main() { return 0; }"
                            INKLING_ARM64_${name}_IN_BASE)
  if(INKLING_ARM64_${name}_IN_BASE)
    set(result base)
  else()
    set(result "")
    foreach(attr "${modifier}" "${fallback}")
      string(MAKE_C_IDENTIFIER "INKLING_ARM64_${name}_${attr}" var)
      check_cxx_source_compiles("#include <arm_neon.h>\n__attribute__((target(\"${attr}\"))) ${body}\nint main() { return 0; }"
                                ${var})
      if(${var})
        set(result "${attr}")
        break()
      endif()
    endforeach()
  endif()
  set(INKLING_ARM64_${name} "${result}" PARENT_SCOPE)
endfunction()

inkling_arm64_feature(DOTPROD __ARM_FEATURE_DOTPROD "+dotprod" "arch=armv8.2-a+dotprod"
  "int32x4_t f(int32x4_t a, int8x16_t b, int8x16_t c) { return vdotq_s32(a, b, c); }")
inkling_arm64_feature(I8MM __ARM_FEATURE_MATMUL_INT8 "+dotprod+i8mm" "arch=armv8.2-a+dotprod+i8mm"
  "int32x4_t f(int32x4_t a, int8x16_t b, int8x16_t c) { return vmmlaq_s32(vdotq_s32(a, b, c), b, c); }")
if(NOT INKLING_ARM64_DOTPROD AND NOT INKLING_ARM64_I8MM)
  message(WARNING "ARM64: ${CMAKE_CXX_COMPILER} ${arm64_base} can compile neither SDOT (dotprod) nor SMMLA (i8mm): "
                  "the int8 and int4 kernels will be plain NEON only, also on CPUs that have them")
elseif(NOT INKLING_ARM64_I8MM)
  message(WARNING "ARM64: ${CMAKE_CXX_COMPILER} ${arm64_base} cannot compile SMMLA (i8mm): "
                  "the int8 and int4 kernels stop at SDOT, also on CPUs that have i8mm")
endif()
message(STATUS "ARM64 kernels: target '${INKLING_ARCH}' (empty: the compiler's default); "
               "dotprod: '${INKLING_ARM64_DOTPROD}', i8mm: '${INKLING_ARM64_I8MM}' ('base': the target has it)")
