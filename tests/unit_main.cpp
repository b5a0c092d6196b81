// The unit tests' main: doctest's, after INKLING_TEST_ISA (an `--isa` name: scalar, avx2,
// avx512, neon, dotprod, i8mm), when set, has picked the CPU kernels' ISA for the whole run.
// tests/run_all.sh runs the cases that compare the CPU with the Vulkan chain once more under
// each ISA the host has below its best, so a difference that depends on the ISA shows on
// whichever machine runs make test, not only where its CPU happens to differ.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "engine/cpu/kernels.h"

int main(int argc, char** argv) {
    if (const char* isa = std::getenv("INKLING_TEST_ISA"); isa != nullptr && *isa != '\0') {
        try {
            inkling::cpu::set_isa(inkling::cpu::parse_isa(isa));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "INKLING_TEST_ISA=%s: %s\n", isa, e.what());
            return 2;
        }
        std::fprintf(stderr, "unit tests: CPU kernels forced to %s\n", isa);
    }
    return doctest::Context(argc, argv).run();
}
