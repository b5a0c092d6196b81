// Writes experts.inkx: every routed expert quantized into its record, in record order,
// one expert in memory at a time, the header with the CRC table written last at offset 0
// (its space is reserved from the start). Resumes an interrupted run from its state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "engine/convert/options.h"
#include "engine/convert/output_file.h"
#include "engine/convert/plan.h"
#include "engine/convert/progress.h"
#include "engine/convert/quant_error.h"
#include "engine/convert/resume_state.h"
#include "engine/convert/source_pages.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/weights.h"

namespace inkling::convert {

// How far a previous run got: the records of `out` that check out against `state` (their
// CRCs re-read from the file), and the error sums that go with them. Truncates the file
// after them (a torn tail).
struct ResumePoint {
    std::int64_t records = 0;
    QuantError errors;
};
ResumePoint find_resume_point(const experts::ContainerHeader& header, OutputFile& out, const ResumeState& state);

struct ExpertJob {
    const model::Model& model;
    const Plan& plan;
    const Options& options;
    ResumeState& state;  // options and source filled; crcs and errors grow as records finish
    const SourcePages& pages;
    Progress& progress;
    cpu::ThreadPool& pool;  // converts pool.size() experts at a time
};

// Continues `out` from `start` (records before it already in the file, their CRCs in
// job.state.crcs) to the last record, then writes the header. Adds to `errors`, one
// record's sums at a time in record order: the figures do not depend on the thread count
// or on where a run was resumed.
void write_experts(ExpertJob& job, OutputFile& out, const ResumePoint& start, QuantError& errors);

}  // namespace inkling::convert
