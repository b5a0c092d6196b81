#include "engine/convert/expert_writer.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace inkling::convert {
namespace {

const char* const kKinds[3] = {"experts.gate", "experts.up", "experts.down"};

// Quantizes one expert into `record` (zeroed, record_bytes long).
void fill_record(const model::Ffn& f, const experts::RecordLayout& layout, const Scheme& scheme,
                 std::vector<float>& rows, std::byte* record, QuantError& errors) {
    const model::Matrix* mats[3] = {&f.gate, &f.up, &f.down};
    const experts::MatrixSection* secs[3] = {&layout.gate, &layout.up, &layout.down};
    for (int k = 0; k < 3; ++k) {
        const model::Matrix& m = *mats[k];
        rows.resize(static_cast<std::size_t>(m.rows * m.cols));
        for (std::int64_t r = 0; r < m.rows; ++r) model::row_to_f32(m, r, rows.data() + r * m.cols);
        quantize_rows(scheme, rows.data(), m.rows, m.cols, record + secs[k]->data_at,
                      reinterpret_cast<float*>(record + secs[k]->scales_at), errors, kKinds[k]);
        errors.count_tensor(kKinds[k]);
    }
}

// The fault hook: a run killed while writing record `index`.
[[noreturn]] void die_mid_record(OutputFile& out, const experts::ContainerHeader& h, std::int64_t index) {
    std::vector<std::byte> half(static_cast<std::size_t>(h.record_bytes / 2), std::byte{0xab});
    out.pwrite_all(half.data(), half.size(), h.record_offset(index));
    std::fprintf(stderr, "[convert] fault hook: killed after %lld records\n", static_cast<long long>(index));
    std::fflush(stderr);
    std::raise(SIGKILL);
    std::abort();
}

}  // namespace

ResumePoint find_resume_point(const experts::ContainerHeader& h, OutputFile& out, const ResumeState& state) {
    ResumePoint p;
    const std::int64_t saved = static_cast<std::int64_t>(state.crcs.size());
    const std::int64_t in_file = std::max<std::int64_t>(0, (out.size() - h.data_offset) / h.record_bytes);
    std::int64_t good = 0;
    std::vector<std::byte> record(static_cast<std::size_t>(h.record_bytes));
    for (; good < std::min({saved, in_file, h.record_count()}); ++good) {
        out.read_at(record.data(), record.size(), h.record_offset(good));
        if (experts::crc32(record.data(), record.size()) != state.crcs[static_cast<std::size_t>(good)]) break;
    }
    // The error sums hold for exactly `saved` records: anything less starts over.
    if (good == saved) {
        p.records = good;
        p.errors = QuantError::from_json(state.errors);
    } else if (saved > 0) {
        std::fprintf(stderr,
                     "[convert] %s: %lld of the %lld recorded records check out; converting the experts again\n",
                     out.partial_path().c_str(), static_cast<long long>(good), static_cast<long long>(saved));
    }
    out.truncate(p.records > 0 ? h.record_offset(p.records) : 0);
    return p;
}

void write_experts(ExpertJob& job, OutputFile& out, const ResumePoint& start, QuantError& errors) {
    const auto& h = job.plan.experts;
    const auto layout = experts::record_layout(h.format, h.format == experts::Format::Int4 ? h.group : 32, h.hidden,
                                               h.inter);
    auto& crcs = job.state.crcs;
    crcs.resize(static_cast<std::size_t>(start.records));
    std::vector<std::byte> record(static_cast<std::size_t>(h.record_bytes));
    std::vector<float> rows;
    auto last_save = std::chrono::steady_clock::now();
    for (std::int64_t index = start.records; index < h.record_count(); ++index) {
        if (index == job.options.fault_stop_after_records) die_mid_record(out, h, index);
        const int layer = h.layers[static_cast<std::size_t>(index / h.experts)];
        const model::Ffn& f = job.model.weights.layers[static_cast<std::size_t>(layer)]
                                  .experts[static_cast<std::size_t>(index % h.experts)];
        std::memset(record.data(), 0, record.size());
        fill_record(f, layout, job.plan.expert_scheme, rows, record.data(), errors);
        out.pwrite_all(record.data(), record.size(), h.record_offset(index));
        crcs.push_back(experts::crc32(record.data(), record.size()));
        for (const model::Matrix* m : {&f.gate, &f.up, &f.down}) job.pages.drop(*m);
        job.progress.add(expert_source_bytes(f));
        const auto now = std::chrono::steady_clock::now();
        if (now - last_save >= std::chrono::seconds(1) || index + 1 == job.options.fault_stop_after_records) {
            job.state.errors = errors.to_json();
            job.state.save(job.options.dst);
            last_save = now;
        }
    }
    experts::ContainerHeader header = h;
    const auto bytes = experts::encode_header(header, crcs);
    out.pwrite_all(bytes.data(), bytes.size(), 0);
    job.state.errors = errors.to_json();
    job.state.save(job.options.dst);
}

}  // namespace inkling::convert
