// build/inkling-options-doc: docs/configuration.md from the declarations of the four
// binaries (engine/options.cpp, gateway/options.cpp, tools/coli/options.cpp,
// tools/dmel/options.cpp), printed to stdout or written to --out FILE (`make options-doc`).
// Declaration mistakes (protocol/cli/option.h's problems()) go to stderr, exit status 1,
// so the options-doc suite of `make test` fails on them as on a stale doc.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include "engine/options.h"
#include "gateway/options.h"
#include "protocol/cli/markdown.h"
#include "tools/coli/options.h"
#include "tools/dmel/options.h"

int main(int argc, char** argv) {
    const inkling::cli::Program* programs[] = {&inkling::engine::program(), &inkling::gateway::program(),
                                               &coli::program(), &inkling::dmel::program()};
    std::string out;
    if (argc == 3 && std::string_view(argv[1]) == "--out") {
        out = argv[2];
    } else if (argc != 1) {
        std::fprintf(stderr, "usage: inkling-options-doc [--out FILE]\n");
        return 2;
    }
    int bad = 0;
    for (const auto* p : programs)
        for (const auto& problem : inkling::cli::problems(*p)) {
            std::fprintf(stderr, "inkling-options-doc: %s\n", problem.c_str());
            ++bad;
        }
    if (bad) return 1;
    const std::string md = inkling::cli::configuration_markdown(programs);
    if (out.empty()) {
        std::cout << md;
        return 0;
    }
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f << md;
    f.close();
    if (!f) {
        std::fprintf(stderr, "inkling-options-doc: cannot write %s\n", out.c_str());
        return 1;
    }
    return 0;
}
