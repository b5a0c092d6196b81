# Cross-compiling for 64-bit ARM Linux with Debian's aarch64 toolchain (g++-aarch64-linux-gnu).
# `make arm64` uses it (tools/arm64/build.sh). The libraries are Debian's own arm64 packages,
# installed beside the host's through multiarch (tools/deps/packages.txt, `:arm64`): their
# headers are the host's /usr/include (identical across architectures) and their libraries
# and .pc files sit in /usr/lib/aarch64-linux-gnu, where Debian's cross compilers and CMake
# (CMAKE_LIBRARY_ARCHITECTURE, from the compiler) look.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# pkg-config (PCRE2, libsamplerate) reads the arm64 packages' .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# glslc and the other build-time programs are the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# Debian's arm64 libc (libc6:arm64, which the -dev packages bring) provides the loader at
# /lib/ld-linux-aarch64.so.1, so qemu-aarch64 runs the binaries with no -L; libstdc++ and
# libgcc go inside each binary (the host has them only under /usr/aarch64-linux-gnu).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static-libstdc++ -static-libgcc")
# What runs the test binaries here (try_run, ctest): QEMU's user-mode emulator.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
