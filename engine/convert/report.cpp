#include "engine/convert/report.h"

#include <cstdio>

namespace inkling::convert {

nlohmann::json make_report(const Options& o, const Plan& plan, const QuantError& errors, const RunFacts& f) {
    nlohmann::ordered_json j;
    j["source"] = std::filesystem::weakly_canonical(o.src).string();
    j["layout"] = f.layout;
    j["options"] = o.output_options();
    nlohmann::json written = {{"model.safetensors", plan.layout.file_bytes}};
    if (plan.has_experts) written["experts.inkx"] = plan.experts.file_bytes();
    for (const auto& name : plan.copied) written[name] = std::filesystem::file_size(o.src / name);
    j["files"] = written;
    j["output_bytes"] = plan.output_bytes();
    j["source_matrix_bytes"] = f.source_bytes;
    if (plan.has_experts)
        j["experts"] = {{"records", plan.experts.record_count()},
                        {"record_bytes", plan.experts.record_bytes},
                        {"layers", plan.experts.layers},
                        {"experts_per_layer", plan.experts.experts},
                        {"resumed_after_record", f.resumed_records}};
    nlohmann::json dropped = nlohmann::json::array();
    for (const auto& d : plan.dropped) dropped.push_back({{"what", d.what}, {"tensors", d.tensors}, {"bytes", d.bytes}});
    j["dropped"] = dropped;
    j["seconds"] = f.seconds;
    j["mb_per_s"] = f.convert_seconds > 0 ? static_cast<double>(f.bytes_this_run) / 1e6 / f.convert_seconds : 0.0;
    j["quantization_error"] = errors.to_json();
    for (auto& [_, k] : j["quantization_error"].items()) {
        k.erase("err2");
        k.erase("ref2");
    }
    return j;
}

std::string summary(const nlohmann::json& r) {
    char buf[256];
    std::string out;
    std::snprintf(buf, sizeof buf, "[convert] wrote %.1f MB in %.1f s (%.1f MB/s of source matrices)\n",
                  r["output_bytes"].get<double>() / 1e6, r["seconds"].get<double>(), r["mb_per_s"].get<double>());
    out += buf;
    for (const auto& [name, bytes] : r["files"].items()) {
        std::snprintf(buf, sizeof buf, "  %-24s %12lld bytes\n", name.c_str(), bytes.get<long long>());
        out += buf;
    }
    if (r.contains("experts") && r["experts"]["resumed_after_record"].get<std::int64_t>() > 0) {
        std::snprintf(buf, sizeof buf, "[convert] resumed after record %lld of %lld\n",
                      r["experts"]["resumed_after_record"].get<long long>(), r["experts"]["records"].get<long long>());
        out += buf;
    }
    for (const auto& d : r["dropped"]) {
        std::snprintf(buf, sizeof buf, "[convert] dropped the %s (%lld tensors, %.1f MB); --keep-audio keeps it\n",
                      d["what"].get<std::string>().c_str(), d["tensors"].get<long long>(),
                      d["bytes"].get<double>() / 1e6);
        out += buf;
    }
    if (!r["quantization_error"].empty()) {
        out += "[convert] quantization error (relative L2 per tensor kind):\n";
        out += "  kind              scheme    tensors  relative L2\n";
        for (const auto& [name, k] : r["quantization_error"].items()) {
            std::snprintf(buf, sizeof buf, "  %-17s %-9s %7lld  %.3e\n", name.c_str(),
                          k["scheme"].get<std::string>().c_str(), k["tensors"].get<long long>(),
                          k["relative_l2"].get<double>());
            out += buf;
        }
    }
    return out;
}

}  // namespace inkling::convert
