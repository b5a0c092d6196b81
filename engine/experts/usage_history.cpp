#include "engine/experts/usage_history.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>

#include "platform/file_io.h"
#include "platform/process.h"

namespace inkling::experts {
namespace {
constexpr const char* kKind = "inkling-expert-usage";
}

UsageHistory::UsageHistory(std::vector<int> layers, int experts, double half_life_tokens)
    : layers_(std::move(layers)), experts_(experts), half_life_(half_life_tokens) {
    counts_.assign(layers_.size(), std::vector<double>(static_cast<std::size_t>(experts_), 0.0));
}

UsageHistory UsageHistory::load(const std::filesystem::path& path, std::vector<int> layers, int experts,
                                std::string& warning) {
    UsageHistory h(layers, experts);
    warning.clear();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return h;
    auto fail = [&](const std::string& why) {
        warning = path.string() + ": " + why + "; starting with an empty expert usage history";
        return UsageHistory(layers, experts);
    };
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail("cannot open");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
        if (!j.is_object() || j.value("kind", "") != kKind || j.value("version", 0) != 1) return fail("not an expert usage file (v1)");
        if (j.at("experts").get<int>() != experts || j.at("layers").get<std::vector<int>>() != layers)
            return fail("written for another model (experts or sparse layers differ)");
        const double half_life = j.at("half_life_tokens").get<double>();
        if (!(half_life > 0)) return fail("half_life_tokens must be positive");
        h.half_life_ = half_life;
        h.tokens_ = j.at("tokens").get<std::uint64_t>();
        const auto& rows = j.at("counts");
        if (!rows.is_array() || rows.size() != layers.size()) return fail("counts: one row per sparse layer expected");
        for (std::size_t s = 0; s < layers.size(); ++s) {
            auto row = rows[s].get<std::vector<double>>();
            if (row.size() != static_cast<std::size_t>(experts)) return fail("counts: one number per expert expected");
            for (double v : row)
                if (!std::isfinite(v) || v < 0) return fail("counts must be finite and not negative");
            h.counts_[s] = std::move(row);
        }
    } catch (const nlohmann::json::exception& e) {
        return fail(std::string("corrupt (") + e.what() + ")");
    }
    return h;
}

void UsageHistory::save(const std::filesystem::path& path) const {
    nlohmann::json j = {{"kind", kKind},         {"version", 1},   {"experts", experts_},
                        {"layers", layers_},     {"half_life_tokens", half_life_},
                        {"tokens", tokens_},     {"counts", counts_}};
    const std::string text = j.dump() + "\n";
    // A fresh name made like mkostemp (O_EXCL, mode 0600): never a file or a symlink that
    // someone put there first.
    std::string tmp_name = path.string() + ".tmp.XXXXXX";
    bool created = false;
    auto fail = [&](const std::string& what) {
        const std::string err = platform::last_error();
        std::error_code ec;
        if (created) std::filesystem::remove(tmp_name, ec);
        throw std::runtime_error(path.string() + ": cannot save the expert usage history (" + what + ": " + err + ")");
    };
    const platform::File fd = platform::create_private_file(tmp_name, 0);
    if (fd == platform::kNoFile) fail("create " + tmp_name);
    created = true;
    std::size_t done = 0;
    while (done < text.size()) {
        const std::int64_t n = platform::write_at(fd, text.data() + done, text.size() - done,
                                                  static_cast<std::int64_t>(done));
        if (n <= 0) {
            platform::close_file(fd);
            fail("write");
        }
        done += static_cast<std::size_t>(n);
    }
    if (!platform::sync_file(fd)) {
        platform::close_file(fd);
        fail("fsync");
    }
    platform::close_file(fd);
    if (!platform::replace_file(tmp_name, path)) fail("rename");
}

void UsageHistory::add(int slot, int expert, double rows) { counts_[slot][expert] += rows; }

void UsageHistory::add_tokens(std::uint64_t tokens) {
    if (tokens == 0) return;
    tokens_ += tokens;
    const double f = std::exp2(-static_cast<double>(tokens) / half_life_);
    for (auto& row : counts_)
        for (double& v : row) v *= f;
}

std::vector<int> UsageHistory::top(int slot, int n) const {
    const auto& row = counts_[slot];
    std::vector<int> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    std::vector<int> out;
    for (int e : order) {
        if (static_cast<int>(out.size()) >= n || row[e] <= 0) break;
        out.push_back(e);
    }
    return out;
}

}  // namespace inkling::experts
