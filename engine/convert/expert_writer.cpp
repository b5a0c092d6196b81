#include "engine/convert/expert_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "platform/process.h"

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
    platform::die_now();
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
                     out.partial_path().string().c_str(), static_cast<long long>(good), static_cast<long long>(saved));
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
    auto expert = [&](std::int64_t index) -> const model::Ffn& {
        const int layer = h.layers[static_cast<std::size_t>(index / h.experts)];
        return job.model.weights.layers[static_cast<std::size_t>(layer)]
            .experts[static_cast<std::size_t>(index % h.experts)];
    };
    // One slot a thread: its record, its f32 rows, its error sums.
    const std::int64_t batch = job.pool.size();
    std::vector<std::vector<std::byte>> records(static_cast<std::size_t>(batch));
    std::vector<std::vector<float>> rows(static_cast<std::size_t>(batch));
    std::vector<QuantError> record_errors(static_cast<std::size_t>(batch));
    const std::int64_t fault = job.options.fault_stop_after_records;
    auto last_save = std::chrono::steady_clock::now();
    for (std::int64_t first = start.records; first < h.record_count();) {
        if (first == fault) die_mid_record(out, h, first);
        std::int64_t n = std::min(batch, h.record_count() - first);
        if (fault > first) n = std::min(n, fault - first);
        job.pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t k = begin; k < end; ++k) {
                auto& record = records[static_cast<std::size_t>(k)];
                record.assign(static_cast<std::size_t>(h.record_bytes), std::byte{0});
                record_errors[static_cast<std::size_t>(k)] = QuantError();
                fill_record(expert(first + k), layout, job.plan.expert_scheme, rows[static_cast<std::size_t>(k)],
                            record.data(), record_errors[static_cast<std::size_t>(k)]);
            }
        });
        for (std::int64_t k = 0; k < n; ++k) {
            const auto& record = records[static_cast<std::size_t>(k)];
            const model::Ffn& f = expert(first + k);
            out.pwrite_all(record.data(), record.size(), h.record_offset(first + k));
            crcs.push_back(experts::crc32(record.data(), record.size()));
            errors.merge(record_errors[static_cast<std::size_t>(k)]);
            for (const model::Matrix* m : {&f.gate, &f.up, &f.down}) job.pages.drop(*m);
            job.progress.add(expert_source_bytes(f));
        }
        first += n;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_save >= std::chrono::seconds(1) || first == fault) {
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
