#include "engine/convert/destination.h"


#include <set>
#include <stdexcept>

namespace inkling::convert {
namespace {

namespace fs = std::filesystem;

constexpr const char* kReport = "convert-report.json";

std::string gigabytes(std::int64_t bytes) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
    return buf;
}

}  // namespace

bool is_converter_file(const std::string& name) {
    static const std::set<std::string> kNames = {
        "config.json",         "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
        "generation_config.json", "model.safetensors", "experts.inkx", kReport, "experts.inkx.state"};
    std::string base = name;
    if (base.ends_with(".partial")) base.resize(base.size() - 8);
    return kNames.count(base) > 0 || base.starts_with("chat_template");
}

Destination inspect_destination(const Options& o, const nlohmann::json& fingerprint) {
    Destination d;
    const fs::path& dst = o.dst;
    if (!fs::exists(dst)) return d;
    d.exists = true;
    if (!fs::is_directory(dst)) throw std::runtime_error(dst.string() + " exists and is not a directory");
    if (fs::exists(o.src) && fs::equivalent(o.src, dst))
        throw std::runtime_error("the destination is the source directory: give a new directory");
    std::string foreign;
    bool any = false;
    for (const auto& e : fs::directory_iterator(dst)) {
        any = true;
        const std::string name = e.path().filename().string();
        // The engine keeps its expert usage history next to a converted model: not ours to
        // remove, no reason to refuse.
        if (name.starts_with("expert-usage.json")) continue;
        if (!e.is_regular_file() || !is_converter_file(name)) foreign = name;
    }
    if (!any) return d;
    const bool state = fs::exists(ResumeState::path(dst)), report = fs::exists(dst / kReport);
    if (!foreign.empty() || (!state && !report))
        throw std::runtime_error(dst.string() + " exists and is not an `inkling convert` output (it holds " +
                                 (foreign.empty() ? "files but no convert-report.json" : "'" + foreign + "'") +
                                 "): give a new or empty directory");
    if (o.restart) {
        d.clear = true;
        return d;
    }
    if (!state)
        throw std::runtime_error(dst.string() + " holds a finished conversion (" + kReport +
                                 "): pass --restart to convert again into it");
    d.resume = ResumeState::load(dst);
    const std::string again = "; pass --restart to discard it and start over";
    if (d.resume->options != o.output_options())
        throw std::runtime_error(dst.string() + " holds an unfinished conversion with other options (" +
                                 d.resume->options.dump() + ", now " + o.output_options().dump() + ")" + again);
    if (d.resume->source != fingerprint)
        throw std::runtime_error(dst.string() + " holds an unfinished conversion of another source, or the source "
                                 "files changed since (names, sizes or times differ)" + again);
    return d;
}

void check_free_space(const fs::path& dst, std::int64_t needed) {
    fs::path at = fs::absolute(dst);
    while (!fs::exists(at) && at.has_parent_path() && at != at.parent_path()) at = at.parent_path();
    std::error_code ec;
    const fs::space_info space = fs::space(at, ec);
    if (ec) return;  // unknown: the writes will tell
    const auto available = static_cast<std::int64_t>(space.available);
    if (available < needed)
        throw std::runtime_error("not enough free space for " + dst.string() + ": the conversion writes " +
                                 std::to_string(needed) + " bytes (" + gigabytes(needed) + "), " + at.string() +
                                 " has " + std::to_string(available) + " (" + gigabytes(available) + ") available");
}

void remove_converter_files(const fs::path& dst) {
    std::error_code ec;
    if (!fs::is_directory(dst, ec)) return;
    std::vector<fs::path> doomed;
    for (const auto& e : fs::directory_iterator(dst, ec))
        if (e.is_regular_file() && is_converter_file(e.path().filename().string())) doomed.push_back(e.path());
    for (const auto& p : doomed) fs::remove(p, ec);
}

}  // namespace inkling::convert
