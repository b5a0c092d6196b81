// Where a request's output stands in its grammar: a set of parse configurations (a
// state, and the stack of callers to resume once its rule ends), advanced by each
// generated token. Several configurations live at once only where the grammar is
// ambiguous so far (anyOf branches that start alike).
//
//   Matcher m(grammar);
//   m.accept_bytes("{\"a\":");     // false: the bytes leave the grammar (m unchanged)
//   m.accept_token(id);            // a special token
//   m.can_end();                   // EOS allowed here
//
// Stacks are shared, interned nodes (equal stacks have equal ids), so a set of
// configurations is a small value that mask.h can key its cache by.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace inkling::grammar {

struct Config {
    std::int32_t state;
    std::int32_t stack;  // a StackPool node, -1 = the root rule (nothing to return to)
    bool operator==(const Config&) const = default;
};

// Caller frames, interned: node (parent, resume) has one id for the pool's life.
class StackPool {
public:
    // Nesting past this depth is not generated: a call that would go deeper is dropped
    // (json_object's `{`/`[` are then masked), so a model cannot grow a stack for ever.
    static constexpr std::int32_t kMaxDepth = 64;
    std::int32_t push(std::int32_t parent, std::int32_t resume);  // -1 when too deep
    std::int32_t parent(std::int32_t node) const { return nodes_[node].parent; }
    std::int32_t resume(std::int32_t node) const { return nodes_[node].resume; }

private:
    struct Node {
        std::int32_t parent, resume, depth;
    };
    std::vector<Node> nodes_;
    std::unordered_map<std::uint64_t, std::int32_t> index_;
};

using Configs = std::vector<Config>;

// The closure: configurations reached from `set` by entering called rules and by ending
// rules (returning to their callers), duplicates dropped. `set` is extended in place.
void close(const Grammar& g, StackPool& pool, Configs& set);
// One byte from a closed set into `out` (closed), which is empty if the byte is refused.
void step_byte(const Grammar& g, StackPool& pool, const Configs& from, std::uint8_t byte, Configs& out);
bool set_can_end(const Grammar& g, const Configs& closed);

class Matcher {
public:
    explicit Matcher(std::shared_ptr<const Grammar> grammar);
    // Each returns false, and changes nothing, when the input is outside the grammar.
    bool accept_bytes(std::string_view bytes);
    bool accept_token(std::int32_t id);  // a special token (an added token's id)
    bool can_end() const;
    // Nothing but the end is possible (the mask holds only EOS).
    bool finished() const;
    const Configs& configs() const { return now_; }
    const Grammar& grammar() const { return *g_; }
    StackPool& pool() { return *pool_; }

private:
    std::shared_ptr<const Grammar> g_;
    std::shared_ptr<StackPool> pool_;  // append-only, so copies of a matcher share it
    Configs now_, scratch_;
};

}  // namespace inkling::grammar
