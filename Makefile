# The single entry point. On a fresh Debian 12 machine:
#   make run    build, then start what the project serves
#   make test   build everything, run every test; ends with "N passed, N failed, N skipped"
# Other targets: deps, build, windows, arm64, eval, bench, asan, fuzz, oracle, options-doc, clean. Builds go out of tree into build/.

BUILD       ?= build
ASAN_BUILD  ?= build-asan
FUZZ_BUILD  ?= build-fuzz
WINDOWS_BUILD ?= build-windows
ARM64_BUILD ?= build-arm64
# make arm64 ARCH=...: the ARM64 target architecture (an -march value, or an -mcpu CPU name or
# native); empty: the compiler's default, armv8-a (cmake/arm64.cmake).
ARCH ?=
FUZZ_SECONDS ?= 20
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps build windows arm64 test run eval bench asan fuzz oracle options-doc clean

all: build

deps:
	@tools/deps/install.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD)

# The Windows binaries, cross-built with mingw-w64 (docs/building.md); make test runs them under Wine.
windows: deps
	@tools/windows/build.sh $(WINDOWS_BUILD)

# The ARM64 binaries, cross-built with Debian's aarch64 toolchain (docs/building.md); make test
# runs them under qemu-aarch64.
arm64: deps
	@ARCH=$(ARCH) tools/arm64/build.sh $(ARM64_BUILD)

test: build windows arm64
	@WINDOWS_BUILD=$(abspath $(WINDOWS_BUILD)) ARM64_BUILD=$(abspath $(ARM64_BUILD)) tests/run_all.sh $(BUILD)

run: build
	@tools/run_demo.sh $(BUILD)

# Held-out perplexity of the committed demo model (models/inkling-demo/README.md).
eval: build
	$(BUILD)/inkling eval --model models/inkling-demo --text models/inkling-demo/heldout.txt --ctx 512

# Speed, as ratios measured in one run (see docs/performance.md).
bench: build
	@tools/bench/run.sh $(BUILD)

# Every suite of make test from a Debug build under AddressSanitizer + UBSan. Not in CI: the
# build alone takes ~13 min on 2 cores and the sanitized suites several times make test's
# time; run it before each resolve (docs/building.md). Suites get an hour each here.
asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DINKLING_SANITIZE=ON
	cmake --build $(ASAN_BUILD)
	@SUITE_DEADLINE=3600 tests/run_all.sh $(ASAN_BUILD)

# Each libFuzzer target for FUZZ_SECONDS, starting from the committed seed corpus.
fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINKLING_FUZZ=ON
	cmake --build $(FUZZ_BUILD)
	@tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Regenerates tests/fixtures/golden/ from the PyTorch reference (needs python3-torch).
oracle: deps
	tools/make-tiny/ensure.sh $(BUILD)/fixtures
	/usr/bin/python3 tools/reference/make_goldens.py $(BUILD)/fixtures tests/fixtures/golden

# Rewrites docs/configuration.md from the binaries' flag declarations (engine/options.cpp,
# gateway/options.cpp, tools/coli/options.cpp, tools/dmel/options.cpp); `make test` checks it.
options-doc: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) --target configuration-doc

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(WINDOWS_BUILD) $(ARM64_BUILD)
