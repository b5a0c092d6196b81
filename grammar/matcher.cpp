#include "grammar/matcher.h"

#include <algorithm>

namespace inkling::grammar {

std::int32_t StackPool::push(std::int32_t parent, std::int32_t resume) {
    const std::int32_t depth = parent < 0 ? 1 : nodes_[parent].depth + 1;
    if (depth > kMaxDepth) return -1;
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(parent)) << 32) |
                              static_cast<std::uint32_t>(resume);
    auto [it, fresh] = index_.emplace(key, static_cast<std::int32_t>(nodes_.size()));
    if (fresh) nodes_.push_back({parent, resume, depth});
    return it->second;
}

void close(const Grammar& g, StackPool& pool, Configs& set) {
    // Most sets are one configuration in a state that neither calls nor ends a rule.
    bool any = false;
    for (const Config& c : set) any |= g.branches(c.state);
    if (!any) return;
    auto add = [&](Config c) {
        if (std::find(set.begin(), set.end(), c) == set.end()) set.push_back(c);
    };
    for (std::size_t i = 0; i < set.size(); ++i) {
        const Config c = set[i];
        if (!g.branches(c.state)) continue;
        for (const Edge& e : g.calls(c.state)) {
            const std::int32_t frame = pool.push(c.stack, e.to);
            if (frame >= 0) add({g.rule_start(e.arg), frame});
        }
        if (g.accepting(c.state) && c.stack >= 0) add({pool.resume(c.stack), pool.parent(c.stack)});
    }
}

void step_byte(const Grammar& g, StackPool& pool, const Configs& from, std::uint8_t byte, Configs& out) {
    out.clear();
    for (const Config& c : from) {
        const std::int32_t t = g.next(c.state, byte);
        if (t >= 0 && std::find(out.begin(), out.end(), Config{t, c.stack}) == out.end()) out.push_back({t, c.stack});
    }
    close(g, pool, out);
}

bool set_can_end(const Grammar& g, const Configs& closed) {
    for (const Config& c : closed)
        if (c.stack < 0 && g.accepting(c.state)) return true;
    return false;
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)), pool_(std::make_shared<StackPool>()) {
    now_.push_back({g_->root(), -1});
    close(*g_, *pool_, now_);
}

bool Matcher::accept_bytes(std::string_view bytes) {
    Configs at = now_;
    for (char ch : bytes) {
        step_byte(*g_, *pool_, at, static_cast<std::uint8_t>(ch), scratch_);
        if (scratch_.empty()) return false;
        std::swap(at, scratch_);
    }
    now_ = std::move(at);
    return true;
}

bool Matcher::accept_token(std::int32_t id) {
    scratch_.clear();
    for (const Config& c : now_)
        for (const Edge& e : g_->tokens(c.state))
            if (e.arg == id && std::find(scratch_.begin(), scratch_.end(), Config{e.to, c.stack}) == scratch_.end())
                scratch_.push_back({e.to, c.stack});
    if (scratch_.empty()) return false;
    close(*g_, *pool_, scratch_);
    std::swap(now_, scratch_);
    return true;
}

bool Matcher::can_end() const { return set_can_end(*g_, now_); }

bool Matcher::finished() const {
    for (const Config& c : now_) {
        if (!g_->tokens(c.state).empty()) return false;
        for (std::size_t b = 0; b < 256; ++b)
            if (g_->next(c.state, static_cast<std::uint8_t>(b)) >= 0) return false;
    }
    return can_end();
}

}  // namespace inkling::grammar
