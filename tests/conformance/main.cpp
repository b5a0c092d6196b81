// protocol-conformance: checks that an engine binary speaks the wire of PROTOCOL.md.
//
//   protocol-conformance [--prompt TEXT] [--keys K=V,…] [--stress N] [--timeout-ms N] [--stop-signal TERM|INT]
//                        [-v] -- ENGINE ARGS…
//
// One line per check ("PASS name" / "FAIL name: why"), then "N passed, N failed".
// Exit status 0 only when every check passed.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "conformance/checks.h"
#include "protocol/binary_stdio.h"
#include "protocol/fields.h"

int main(int argc, char** argv) {
    inkling::protocol::init_binary_stdio();
    conformance::Options options;
    int i = 1;
    auto value = [&](const char* flag) -> std::string {
        if (i + 1 >= argc) {
            std::fprintf(stderr, "protocol-conformance: %s needs a value\n", flag);
            std::exit(2);
        }
        return argv[++i];
    };
    for (; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        } else if (a == "--prompt") {
            options.prompt = value("--prompt");
        } else if (a == "--keys") {
            options.keys = value("--keys");
            for (char& c : options.keys)
                if (c == ',') c = ' ';
        } else if (a == "--timeout-ms") {
            auto ms = inkling::protocol::parse_u64(value("--timeout-ms"));
            if (!ms) {
                std::fprintf(stderr, "protocol-conformance: --timeout-ms needs an integer\n");
                return 2;
            }
            options.timeout = std::chrono::milliseconds(*ms);
        } else if (a == "--stress") {
            auto n = inkling::protocol::parse_u64(value("--stress"));
            if (!n || *n > 1000000) {
                std::fprintf(stderr, "protocol-conformance: --stress needs a frame count\n");
                return 2;
            }
            options.stress_frames = static_cast<int>(*n);
        } else if (a == "--stop-signal") {
            const std::string sig = value("--stop-signal");
            if (sig != "TERM" && sig != "INT") {
                std::fprintf(stderr, "protocol-conformance: --stop-signal is TERM or INT, not '%s'\n", sig.c_str());
                return 2;
            }
            options.stop_signal = sig == "INT" ? SIGINT : SIGTERM;
        } else if (a == "--scratch") {
            options.scratch_dir = value("--scratch");
        } else if (a == "-v" || a == "--verbose") {
            options.verbose = true;
        } else {
            std::fprintf(stderr, "protocol-conformance: unknown option '%s'\n", a.c_str());
            return 2;
        }
    }
    for (; i < argc; ++i) options.engine.emplace_back(argv[i]);
    if (options.engine.empty()) {
        std::fprintf(stderr,
                     "usage: protocol-conformance [--prompt TEXT] [--keys K=V,...] "
                     "[--timeout-ms N] [--stop-signal TERM|INT] [-v] -- ENGINE ARGS...\n");
        return 2;
    }
    conformance::Tally t = conformance::run_all_checks(options);
    std::printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed == 0 ? 0 : 1;
}
