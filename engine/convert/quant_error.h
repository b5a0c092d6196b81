// The quantization error of a conversion, per tensor kind ("experts.gate", "attn.q",
// "lm_head", …): relative L2 over every element of every tensor of the kind,
// ‖w − dequant(quant(w))‖₂ / ‖w‖₂, accumulated in double as rows go by.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace inkling::convert {

class QuantError {
public:
    struct Kind {
        std::string scheme;  // "int4g32", "int8", …
        std::int64_t tensors = 0;
        double err2 = 0, ref2 = 0;
        double relative_l2() const;
    };
    void add_rows(const std::string& kind, const std::string& scheme, const float* ref, const float* deq,
                  std::int64_t n);
    void count_tensor(const std::string& kind) { ++kinds_[kind].tensors; }
    // Adds another accumulator's sums (one expert's, converted on another thread).
    void merge(const QuantError& other);
    const std::map<std::string, Kind>& kinds() const { return kinds_; }

    // {"kind": {"scheme", "tensors", "relative_l2", "err2", "ref2"}}: the sums travel too,
    // so a resumed run continues them.
    nlohmann::json to_json() const;
    static QuantError from_json(const nlohmann::json& j);

private:
    std::map<std::string, Kind> kinds_;
};

}  // namespace inkling::convert
