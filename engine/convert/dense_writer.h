// Writes model.safetensors: the header (every place known from the plan), then each
// tensor, a bounded chunk of rows at a time, kept, widened or quantized as planned.
#pragma once

#include "engine/convert/output_file.h"
#include "engine/convert/plan.h"
#include "engine/convert/progress.h"
#include "engine/convert/quant_error.h"
#include "engine/convert/source_pages.h"

namespace inkling::convert {

void write_dense(const Plan& plan, const Scheme& scheme, OutputFile& out, const SourcePages& pages,
                 Progress& progress, QuantError& errors);

}  // namespace inkling::convert
