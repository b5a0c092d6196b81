// How often each routed expert has been used, per sparse layer, with exponential decay,
// kept across runs in a small JSON file: the expert cache pins each layer's most used
// experts at start-up from it.
//
// Decay: a half-life in tokens. Every token the forward processes multiplies all counts by
// 2^(-1/half_life) (applied per step), so an expert last used half_life tokens ago weighs
// half as much as one used now; the default half-life is 65,536 tokens.
//
// The file (`<model dir>/expert-usage.json` by default):
//   {"kind":"inkling-expert-usage","version":1,"experts":E,"layers":[…],
//    "half_life_tokens":H,"tokens":T,"counts":[[…E numbers…], …one row per layer…]}
// It is written atomically (a temporary file, fsync, rename); a missing, unreadable or
// corrupt file, or one written for another geometry, loads as an empty history with a
// warning — never an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace inkling::experts {

class UsageHistory {
public:
    static constexpr double kDefaultHalfLife = 65536.0;

    UsageHistory() = default;
    // An empty history for these sparse layers (model layer indices) and expert count.
    UsageHistory(std::vector<int> layers, int experts, double half_life_tokens = kDefaultHalfLife);

    // The history in `path` for this geometry. On any problem: an empty history, and
    // `warning` says what was wrong (it stays empty when the file simply does not exist).
    static UsageHistory load(const std::filesystem::path& path, std::vector<int> layers, int experts,
                             std::string& warning);
    // Temporary file in the same folder, fsync, rename. Throws std::runtime_error.
    void save(const std::filesystem::path& path) const;

    // `rows` routed to `expert` of layers()[slot].
    void add(int slot, int expert, double rows);
    // `tokens` more went through the model: decays every count.
    void add_tokens(std::uint64_t tokens);

    double count(int slot, int expert) const { return counts_[slot][expert]; }
    // The `n` most used experts of layers()[slot] with a count above zero, most used
    // first (ties: the lower id), at most n.
    std::vector<int> top(int slot, int n) const;

    const std::vector<int>& layers() const { return layers_; }
    int experts() const { return experts_; }
    double half_life() const { return half_life_; }
    std::uint64_t tokens() const { return tokens_; }

private:
    std::vector<int> layers_;
    int experts_ = 0;
    double half_life_ = kDefaultHalfLife;
    std::uint64_t tokens_ = 0;
    std::vector<std::vector<double>> counts_;  // [slot][expert]
};

}  // namespace inkling::experts
