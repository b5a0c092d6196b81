// The engine core behind `inkling serve`: slots (one conversation state each), admission
// checks, prefix reuse and pinned snapshots, and rounds of batched forwards. No I/O: it
// hands frames to a FrameSink, and the serve loop (serve_loop.h) owns stdin/stdout.
//
// One round = one Forward::step_batch over every decoding request's next row plus one
// chunk of one prefilling request, so long prompts never stall the others and an
// expert read once serves every row routed to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cpu/thread_pool.h"
#include "engine/forward/forward.h"
#include "engine/model/tokenizer.h"
#include "engine/model/weights.h"
#include "engine/sampling/sampler.h"
#include "engine/serve/pin_pool.h"
#include "protocol/frames.h"

namespace inkling::sampling {
class GrammarLibrary;
}

namespace inkling::serve {

struct ServeOptions {
    int slots = 4;
    std::int64_t context = 4096;       // positions per slot
    std::int64_t prefill_chunk = 256;  // prompt tokens per round and request
    std::size_t pins = 64;             // pinned snapshots kept (LRU)
    std::size_t snapshot_bytes = 256u << 20;  // and the bytes they may hold (LRU past it)
    // Ids that open a message: the position before each (after the first) is a turn
    // boundary, where a prefill is cut and its state pinned (pin_pool.h). Empty: none.
    std::vector<std::int32_t> turn_tokens;
    // Fault injection for the gateway's supervision tests (documented in docs/engine.md):
    std::string fault_kill_once_file;  // if this file does not exist: create it, then die
                                       // by SIGKILL on the first SUBMIT, before ACCEPT
    int fault_device_lost_after = 0;   // after this many finished requests, report an
                                       // EVENT device_lost (once)
    std::int64_t fault_hold_after = 0; // a request that has emitted this many tokens (and
                                       // may emit more) is held: no more rounds until a
                                       // STOP or CANCEL names it, so a test's STOP, CANCEL
                                       // or full queue always meets work in flight (0: never)
};

class FrameSink {
public:
    virtual ~FrameSink() = default;
    virtual void send(const protocol::Frame& frame) = 0;
};

class Scheduler {
public:
    // `cache`: a converted model's expert cache (else the forward makes a default one).
    Scheduler(const model::Model& model, const model::Tokenizer* tokenizer, cpu::ThreadPool& pool,
              const ServeOptions& options, std::shared_ptr<experts::ExpertCache> cache = nullptr);
    ~Scheduler();

    // Validates and admits: exactly one ACCEPT or one ERROR goes to `out` (an exception
    // while admitting is an ERROR INTERNAL: no input makes submit throw).
    void submit(const protocol::Submit& request, FrameSink& out);
    void stop(const std::string& id, FrameSink& out);    // → DONE, or ERROR NOT_FOUND
    void cancel(const std::string& id, FrameSink& out);  // → ERROR CANCELLED, or NOT_FOUND
    bool busy() const { return !active_.empty(); }
    forward::Forward& forward() { return forward_; }
    // One batched forward over the requests in flight; emits their frames. A request whose
    // frames cannot be made ends with ERROR INTERNAL; the others go on.
    void run_round(FrameSink& out);
    // Ends request `id` with ERROR INTERNAL `why` (its slot state dropped), or just sends
    // the ERROR when it is not in flight; fail_all ends every request in flight so.
    void abort(const std::string& id, const std::string& why, FrameSink& out);
    void fail_all(const std::string& why, FrameSink& out);

    nlohmann::json info() const;   // the STATS frame after READY
    nlohmann::json stats() const;  // STATS after each DONE and on request

private:
    struct Active;
    void admit(const protocol::Submit& request, FrameSink& out, bool& admitted);
    void emit(Active& a, bool prefilled, const std::vector<float>& row, std::int64_t chunk_start, std::int64_t chunk,
              FrameSink& out);
    void finish(Active& a, bool length_limited, FrameSink& out);
    void fail(Active& a, const std::string& why, FrameSink& out);
    void on_logits(Active& a, const float* logits, FrameSink& out);
    std::string token_text(std::int32_t id) const;
    protocol::TokenLogprobs logprobs_of(const float* logits, std::int32_t chosen, std::uint32_t k) const;
    void erase(const std::string& id);
    nlohmann::json phases_ms() const;
    nlohmann::json expert_cache_stats() const;
    sampling::GrammarLibrary& grammars();

    const model::Model& model_;
    const model::Tokenizer* tokenizer_;
    ServeOptions options_;
    forward::Forward forward_;
    std::vector<forward::SessionState> slots_;
    PinPool pins_;
    std::unique_ptr<sampling::GrammarLibrary> grammars_;  // compiled SUBMIT grammars (made at the first)
    std::map<int, std::unique_ptr<Active>> active_;  // by slot
    std::uint64_t rounds_ = 0;
    // Totals for STATS.
    std::uint64_t requests_done_ = 0, tokens_generated_ = 0, prompt_tokens_ = 0, tokens_reused_ = 0;
    double last_decode_tok_s_ = 0, last_prefill_tok_s_ = 0;
};

// Resident set size of this process in GB (1e9 bytes).
double resident_gb();

// A greedy SUBMIT whose prompt is token ids (ids=1), as benchmarks and tests send them.
protocol::Submit ids_request(const std::string& id, int slot, const std::vector<std::int32_t>& ids, int max_tokens);

}  // namespace inkling::serve
