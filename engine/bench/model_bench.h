// `inkling bench --model DIR`: prefill and decode speed on one model, the decode held against
// the memory bandwidth measured right before and after it; with the flags that ask for them,
// what the expert cache and the Vulkan chain did, several sessions batched together
// (serve_bench.h) and time to first token with prefix reuse.
//
//   inkling::bench::ModelBenchOptions o{.prompt_tokens = 512, .decode_tokens = 64};
//   inkling::bench::bench_model(model, pool, fw, o, attach, std::cout);
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/model/weights.h"

namespace inkling::forward {
class Forward;
}

namespace inkling::bench {

struct ModelBenchOptions {
    int prompt_tokens = 0;                      // --prompt-tokens: the prefill's length
    int decode_tokens = 0;                      // --decode-tokens: greedy steps timed after it
    std::optional<std::vector<int>> sessions;   // --sessions: the counts bench_sessions runs
    int reuse_tokens = 0;                       // --reuse-tokens: bench_reuse/bench_regenerate's length; 0 none
};

// "1,2,4" (--sessions) → {1, 2, 4}; throws std::invalid_argument (std::stoi's) on a bad count.
std::vector<int> parse_session_counts(const std::string& text);

// Runs the benchmark on `fw` (its expert cache and Vulkan chain already attached, as the
// flags say; `attach` gives each sessions' forward the same chain), prints the figures as
// JSON to `out` and `[bench]` lines to stderr.
void bench_model(const model::Model& model, cpu::ThreadPool& pool, forward::Forward& fw, const ModelBenchOptions& o,
                 const std::function<void(forward::Forward&)>& attach, std::ostream& out);

}  // namespace inkling::bench
