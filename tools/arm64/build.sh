#!/usr/bin/env bash
# tools/arm64/build.sh [BUILD_DIR] [TARGET...]: the ARM64 cross build of `make arm64`
# (docs/building.md), with Debian's aarch64 toolchain (cmake/aarch64-linux-gnu.cmake) and
# Debian's arm64 library packages (multiarch; tools/deps/packages.txt). BUILD_DIR defaults to
# build-arm64. TARGETs default to what the ARM64 suites run (tests/arm64/suites.sh): the
# engine, the unit tests and coli. ARCH (the Makefile's) sets the target
# architecture (cmake/arm64.cmake); JOBS the build's parallelism.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-build-arm64}"
shift || true
mkdir -p "$out"
jobs=(${JOBS:+-j "$JOBS"})
# A changed ARCH reconfigures (the cache keeps the last one otherwise).
if [[ ! -f "$out/build.ninja" ]] || ! grep -qxF "INKLING_ARCH:STRING=${ARCH:-}" "$out/CMakeCache.txt"; then
    # -O2 as the Linux build's RelWithDebInfo, without its debug info (the link of the unit
    # tests is the slow step of this build on 2 cores).
    cmake -S "$root" -B "$out" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
        -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG" \
        "-DINKLING_ARCH=${ARCH:-}" >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
    grep -E "ARM64|Warning" -A2 "$out/configure.log" || true
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(inkling unit-tests coli)
cmake --build "$out" --target "${targets[@]}" -- "${jobs[@]}"
