#include "engine/convert/dense_writer.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace inkling::convert {
namespace {

constexpr std::int64_t kChunkFloats = 1 << 21;  // 8 MB of f32 rows at a time

std::int64_t chunk_rows(std::int64_t cols) { return std::max<std::int64_t>(1, kChunkFloats / std::max<std::int64_t>(cols, 1)); }

// Writes one matrix (slice `index` of its item) starting at row `first` of the entry.
void write_matrix(const DenseItem& it, const model::Matrix& m, std::int64_t first_row, const Plan& plan,
                  const Scheme& scheme, OutputFile& out, QuantError& errors) {
    const auto& e = plan.layout.entries[it.entry];
    const std::int64_t step = chunk_rows(m.cols);
    std::vector<float> f32;
    std::vector<std::byte> bytes;
    std::vector<float> scales;
    for (std::int64_t r0 = 0; r0 < m.rows; r0 += step) {
        const std::int64_t n = std::min(step, m.rows - r0);
        const std::int64_t row = first_row + r0;  // in the entry
        switch (it.store) {
        case DenseItem::Store::Keep: {
            const auto rb = model::dtype_bytes(m.dtype, m.cols);
            bytes.resize(rb * static_cast<std::size_t>(n));
            for (std::int64_t r = 0; r < n; ++r) std::memcpy(bytes.data() + r * rb, m.row(r0 + r), rb);
            out.pwrite_all(bytes.data(), bytes.size(), e.offset + row * static_cast<std::int64_t>(rb));
            break;
        }
        case DenseItem::Store::F32:
        case DenseItem::Store::Quantized: {
            f32.resize(static_cast<std::size_t>(n * m.cols));
            for (std::int64_t r = 0; r < n; ++r) model::row_to_f32(m, r0 + r, f32.data() + r * m.cols);
            if (it.store == DenseItem::Store::F32) {
                out.pwrite_all(f32.data(), f32.size() * 4, e.offset + row * m.cols * 4);
                break;
            }
            const std::int64_t rb = scheme.row_bytes(m.cols), g = scheme.groups(m.cols);
            bytes.assign(static_cast<std::size_t>(n * rb), std::byte{0});
            scales.assign(static_cast<std::size_t>(n * g), 0.0f);
            quantize_rows(scheme, f32.data(), n, m.cols, bytes.data(), scales.data(), errors, it.kind);
            out.pwrite_all(bytes.data(), bytes.size(), e.offset + row * rb);
            out.pwrite_all(scales.data(), scales.size() * 4, plan.layout.entries[it.scales_entry].offset + row * g * 4);
            break;
        }
        case DenseItem::Store::Floats: break;
        }
    }
}

}  // namespace

void write_dense(const Plan& plan, const Scheme& scheme, OutputFile& out, const SourcePages& pages,
                 Progress& progress, QuantError& errors) {
    out.pwrite_all(plan.layout.header.data(), plan.layout.header.size(), 0);
    for (const auto& it : plan.dense) {
        if (it.store == DenseItem::Store::Floats) {
            out.pwrite_all(it.floats.data(), it.floats.size() * 4, plan.layout.entries[it.entry].offset);
            continue;
        }
        std::int64_t first_row = 0;
        for (const auto& m : it.mats) {
            write_matrix(it, m, first_row, plan, scheme, out, errors);
            first_row += m.rows;
            pages.drop(m);
            progress.add(static_cast<std::int64_t>(m.bytes()));
        }
        if (it.store == DenseItem::Store::Quantized) errors.count_tensor(it.kind);
    }
}

}  // namespace inkling::convert
