#!/usr/bin/env bash
# tools/windows/build.sh [BUILD_DIR] [TARGET...]: the mingw-w64 cross build of `make windows`
# (docs/building.md). BUILD_DIR (default build-windows) holds, each in its own folder:
#   debian-src/  Debian 12's source packages of PCRE2 and libsamplerate (debian_sources.sh)
#   deps/        their static builds (tools/windows/deps), installed into prefix/
#   main/        the project: inkling.exe, coli.exe, inkling-dmel.exe, the test engines
# TARGETs default to everything the Windows build has. JOBS sets the build's parallelism.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-build-windows}"
shift || true
mkdir -p "$out"
out="$(cd "$out" && pwd)"
toolchain="$root/cmake/mingw-w64-x86_64.cmake"
prefix="$out/prefix"
jobs=(${JOBS:+-j "$JOBS"})

"$root/tools/windows/debian_sources.sh" "$out/debian-src"
if [[ ! -f "$out/deps/build.ninja" ]]; then
    cmake -S "$root/tools/windows/deps" -B "$out/deps" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
        -DINKLING_WINDOWS_PREFIX="$prefix" -DDEBIAN_SRC="$out/debian-src" >/dev/null
fi
cmake --build "$out/deps" -- "${jobs[@]}"
if [[ ! -f "$out/main/build.ninja" ]]; then
    # -O2 as the Linux build's RelWithDebInfo: at -O3 GCC 12 warns falsely (-Wrestrict, GCC
    # bug 105329) inside std::string, and warnings are errors.
    PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" cmake -S "$root" -B "$out/main" -G Ninja \
        -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DINKLING_WINDOWS_PREFIX="$prefix" -DCMAKE_BUILD_TYPE=Release \
        "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG" >/dev/null
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(inkling coli inkling-dmel echo-engine echo-engine-text-stdio)
cmake --build "$out/main" --target "${targets[@]}" -- "${jobs[@]}"
