// What a conversion will write, worked out before anything is written: every tensor of
// model.safetensors under its transformers name with its output dtype and place, the
// expert container's header, the files copied as they are, and the bytes of it all
// (checked against the free space of DST).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/convert/options.h"
#include "engine/convert/quantize_rows.h"
#include "engine/convert/safetensors_layout.h"
#include "engine/experts/container_format.h"
#include "engine/model/weights.h"

namespace inkling::convert {

// One tensor of model.safetensors and where it comes from.
struct DenseItem {
    enum class Store {
        Floats,     // `floats` as F32 (norms, convs, bias banks, router bias, scalars)
        Keep,       // `mats` rows copied as they are (same dtype as SRC)
        F32,        // `mats` widened to F32 (the router)
        Quantized,  // `mats` quantized with the dense scheme, plus NAME.scales
    };
    std::string name;  // transformers name
    Store store = Store::Floats;
    std::vector<std::int64_t> shape;  // as the loader expects it ([S, rows, cols] for stacks)
    std::vector<float> floats;
    std::vector<model::Matrix> mats;  // one, or one per stacked slice; equal shapes
    std::string kind;                 // Quantized: the error-report kind
    std::size_t entry = 0, scales_entry = 0;  // indices into the layout's entries

    std::int64_t source_bytes() const;  // bytes read from SRC
};

struct DroppedPart {
    std::string what;  // "audio tower"
    std::int64_t tensors = 0, bytes = 0;
};

struct Plan {
    std::vector<DenseItem> dense;
    SafetensorsLayout layout;
    bool has_experts = false;  // false: no sparse layer, no experts.inkx
    experts::ContainerHeader experts;
    Scheme expert_scheme;
    std::int64_t expert_source_bytes = 0, dense_source_bytes = 0;
    std::vector<std::string> copied;  // file names in SRC copied to DST as they are
    std::int64_t copied_bytes = 0;
    std::vector<DroppedPart> dropped;

    std::int64_t output_bytes() const;  // everything written, the report aside
};

Plan make_plan(const model::Model& model, const Options& options);

// The source bytes of one routed expert (what converting it reads).
std::int64_t expert_source_bytes(const model::Ffn& f);

}  // namespace inkling::convert
