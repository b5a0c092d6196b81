// `inkling bench` on a converted model: what the expert cache did during the decode
// (hit rate, bytes read from disk per token, the read rate achieved while reads were in
// flight) against a sequential O_DIRECT read of the same container measured right after.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/experts/expert_cache.h"

namespace inkling::bench {

// `before`: the cache's counters when the decode started; `tokens` decoded in `seconds`.
nlohmann::json expert_cache_figures(const experts::ExpertCache& cache, const experts::ExpertCache::Counters& before,
                                    int tokens, double seconds);

}  // namespace inkling::bench
