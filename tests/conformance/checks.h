// The conformance checks: each drives an engine through real pipes and reports
// PASS/FAIL with a reason. See PROTOCOL.md §Conformance for the list.
#pragma once

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

namespace conformance {

struct Options {
    std::vector<std::string> engine;       // command line of the engine under test
    std::string prompt = "Hello, wire!";   // a prompt the engine accepts
    std::string keys;                      // extra SUBMIT keys for it, e.g. "ids=1"
    std::chrono::milliseconds timeout{30000};
    std::string scratch_dir = "/tmp";      // engine stderr logs
    bool verbose = false;
    int stress_frames = 2000;              // random valid/malformed frames; 0 = skip
    int stop_signal = SIGTERM;             // the engine's stop request (SIGINT under Wine)
};

struct Tally {
    int passed = 0;
    int failed = 0;
};

Tally run_all_checks(const Options& options);

}  // namespace conformance
