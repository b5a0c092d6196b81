// `inkling convert SRC DST`: a release or transformers checkpoint → a directory with
// model.safetensors (transformers names, dense matrices kept or quantized), experts.inkx
// (every routed expert int4 or int8) and convert-report.json. docs/convert.md describes
// the command and docs/container.md the files.
//
//   Options o{.src = "ckpt", .dst = "ckpt-int4"};
//   nlohmann::json report = convert(o);  // throws std::runtime_error, nothing half-written
//   std::cout << summary(report);
#pragma once

#include <nlohmann/json.hpp>

#include "engine/convert/options.h"

namespace inkling::convert {

// Validates SRC and DST, then writes DST (resuming an interrupted run of the same
// command). On an error nothing of this run is left in DST; only a signal leaves the
// resume state behind.
nlohmann::json convert(const Options& options);

}  // namespace inkling::convert
