#include "engine/convert/quant_error.h"

#include <cmath>

namespace inkling::convert {

double QuantError::Kind::relative_l2() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? 1.0 : 0.0); }

void QuantError::add_rows(const std::string& kind, const std::string& scheme, const float* ref, const float* deq,
                          std::int64_t n) {
    Kind& k = kinds_[kind];
    k.scheme = scheme;
    double e = 0, r = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(ref[i]) - static_cast<double>(deq[i]);
        e += d * d;
        r += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
    }
    k.err2 += e;
    k.ref2 += r;
}

void QuantError::merge(const QuantError& other) {
    for (const auto& [name, o] : other.kinds_) {
        Kind& k = kinds_[name];
        k.scheme = o.scheme;
        k.tensors += o.tensors;
        k.err2 += o.err2;
        k.ref2 += o.ref2;
    }
}

nlohmann::json QuantError::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, k] : kinds_)
        j[name] = {{"scheme", k.scheme},
                   {"tensors", k.tensors},
                   {"relative_l2", k.relative_l2()},
                   {"err2", k.err2},
                   {"ref2", k.ref2}};
    return j;
}

QuantError QuantError::from_json(const nlohmann::json& j) {
    QuantError q;
    for (const auto& [name, v] : j.items())
        q.kinds_[name] = {v.at("scheme").get<std::string>(), v.at("tensors").get<std::int64_t>(),
                          v.at("err2").get<double>(), v.at("ref2").get<double>()};
    return q;
}

}  // namespace inkling::convert
