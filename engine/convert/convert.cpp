#include "engine/convert/convert.h"

#include <optional>
#include <stdexcept>

#include "engine/convert/dense_writer.h"
#include "engine/convert/destination.h"
#include "engine/convert/expert_writer.h"
#include "engine/convert/report.h"
#include "platform/process.h"

namespace inkling::convert {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

model::Model load_source(const fs::path& src) {
    if (fs::exists(src / experts::kFileName))
        throw std::runtime_error("cannot convert " + src.string() + ": it is already converted (it holds " +
                                 experts::kFileName + ")");
    try {
        // Mapped: the converter reads each source page once and drops it (SourcePages), and a
        // bf16 checkpoint is larger than the memory it converts in.
        return model::load_model(src, model::WeightsMemory::Map);
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("cannot convert: the source checkpoint does not load: ") + e.what());
    }
}

// The source bytes of the first `records` records (already converted by an earlier run).
std::int64_t records_bytes(const model::Model& m, const experts::ContainerHeader& h, std::int64_t records) {
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < records; ++i)
        n += expert_source_bytes(m.weights.layers[static_cast<std::size_t>(h.layers[static_cast<std::size_t>(
                                                      i / h.experts)])]
                                     .experts[static_cast<std::size_t>(i % h.experts)]);
    return n;
}

// Everything after the checks: writes the outputs under .partial names, then renames them.
nlohmann::json write_outputs(const model::Model& model, const Plan& plan, const Options& o,
                             const Destination& dest, const nlohmann::json& fingerprint, Clock::time_point t0) {
    ResumeState state;
    state.options = o.output_options();
    state.source = fingerprint;
    QuantError errors;
    ResumePoint start;
    const SourcePages pages(model.tensors);
    std::optional<OutputFile> experts_out;
    if (plan.has_experts) {
        const fs::path final_path = o.dst / experts::kFileName;
        // Killed between the renames of a finished run: the container goes back to partial.
        if (dest.resume && fs::exists(final_path) && !fs::exists(OutputFile::partial_of(final_path)))
            fs::rename(final_path, OutputFile::partial_of(final_path));
        experts_out.emplace(final_path, dest.resume.has_value());
        if (dest.resume) {
            start = find_resume_point(plan.experts, *experts_out, *dest.resume);
            errors = start.errors;
            state.crcs.assign(dest.resume->crcs.begin(), dest.resume->crcs.begin() + start.records);
        }
    }
    state.errors = errors.to_json();
    state.save(o.dst);  // the marker: from here on a killed run can be resumed

    const std::int64_t resumed_bytes = plan.has_experts ? records_bytes(model, plan.experts, start.records) : 0;
    Progress progress(plan.expert_source_bytes + plan.dense_source_bytes, resumed_bytes);
    if (start.records > 0)
        std::fprintf(stderr, "[convert] resuming after record %lld of %lld\n", static_cast<long long>(start.records),
                     static_cast<long long>(plan.experts.record_count()));
    if (plan.has_experts) {
        cpu::ThreadPool pool(o.threads);
        ExpertJob job{model, plan, o, state, pages, progress, pool};
        write_experts(job, *experts_out, start, errors);
    }
    OutputFile dense_out(o.dst / "model.safetensors", false);
    write_dense(plan, dense_scheme(o.dense), dense_out, pages, progress, errors);
    progress.finish();
    const double convert_seconds = progress.seconds();

    for (const auto& name : plan.copied) copy_file_atomically(o.src / name, o.dst / name);
    dense_out.commit();
    if (experts_out) experts_out->commit();
    RunFacts facts;
    facts.layout = model.weights.layout;
    facts.resumed_records = start.records;
    facts.source_bytes = plan.expert_source_bytes + plan.dense_source_bytes;
    facts.bytes_this_run = progress.bytes_this_run();
    facts.convert_seconds = convert_seconds;
    facts.seconds = since(t0);
    auto report = make_report(o, plan, errors, facts);
    write_file_atomically(o.dst / "convert-report.json", report.dump(2) + "\n");
    fs::remove(ResumeState::path(o.dst));
    sync_directory(o.dst);
    return report;
}

}  // namespace

nlohmann::json convert(const Options& o) {
    const auto t0 = Clock::now();
    // Past a file-size limit, writes fail with EFBIG (reported) instead of killing us.
    platform::ignore_file_size_signal();
    const model::Model model = load_source(o.src);
    const auto fingerprint = source_fingerprint(o.src);
    const Destination dest = inspect_destination(o, fingerprint);
    const Plan plan = make_plan(model, o);
    std::int64_t reusable = 0;
    const fs::path partial = OutputFile::partial_of(o.dst / experts::kFileName);
    if (dest.resume && fs::exists(partial)) reusable = static_cast<std::int64_t>(fs::file_size(partial));
    check_free_space(o.dst, plan.output_bytes() - reusable);

    // From here on DST changes; an error removes what this run (or the run it resumed) wrote.
    if (dest.clear) remove_converter_files(o.dst);
    const bool created = !dest.exists;
    if (created) fs::create_directories(o.dst);
    try {
        return write_outputs(model, plan, o, dest, fingerprint, t0);
    } catch (...) {
        remove_converter_files(o.dst);
        std::error_code ec;
        if (created) fs::remove(o.dst, ec);  // only if empty
        throw;
    }
}

}  // namespace inkling::convert
