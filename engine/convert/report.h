// convert-report.json and the summary printed at the end of a conversion.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/convert/options.h"
#include "engine/convert/plan.h"
#include "engine/convert/quant_error.h"

namespace inkling::convert {

struct RunFacts {
    std::string layout;              // "release" or "transformers"
    std::int64_t resumed_records = 0;
    std::int64_t source_bytes = 0;   // matrices read, the whole conversion
    std::int64_t bytes_this_run = 0; // of them, read by this run
    double seconds = 0;              // this run, load to last rename
    double convert_seconds = 0;      // this run, first record to the last tensor
};

nlohmann::json make_report(const Options& o, const Plan& plan, const QuantError& errors, const RunFacts& facts);

// Lines for the terminal: what was written, what was dropped, the error table.
std::string summary(const nlohmann::json& report);

}  // namespace inkling::convert
