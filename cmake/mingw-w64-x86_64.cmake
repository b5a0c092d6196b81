# Cross-compiling for 64-bit Windows with Debian's mingw-w64, posix thread model
# (g++-mingw-w64-x86-64-posix: std::thread and std::mutex need it). `make windows` uses it
# (tools/windows/build.sh), for the libraries of tools/windows/deps and for the project.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
# Libraries and headers come from the mingw sysroot and from the prefix the deps build
# installs into (INKLING_WINDOWS_PREFIX); programs (glslc, pkg-config) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32 ${INKLING_WINDOWS_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# One .exe each, with libstdc++, libgcc and winpthread inside: nothing to ship beside it.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
