#include "engine/serve/scheduler.h"

#include <cstdio>
#include <filesystem>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <thread>

#include "engine/cpu/kernels.h"
#include "engine/sampling/grammar_session.h"
#include "engine/serve/residency.h"
#include "engine/vulkan/chain_stats.h"
#include "grammar/error.h"
#include "protocol/fields.h"

#include "platform/memory.h"
#include "platform/process.h"
namespace inkling::serve {

using protocol::ErrorCode;
using Clock = std::chrono::steady_clock;

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// JSON for a frame: invalid UTF-8 (a device driver's message, a model folder's name) is
// replaced, never thrown (nlohmann's dump() throws type_error 316 on it).
std::string json_text(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// ids=1 prompts: decimal token ids separated by whitespace, each below `vocab` (the
// unpadded vocabulary: the ids the logits cover, so ECHO and logprobs can score them) and,
// with a tokenizer, one it can decode (ECHO and DATA carry the token's bytes).
std::optional<std::vector<std::int32_t>> parse_id_prompt(const std::string& text, std::int64_t vocab,
                                                         const model::Tokenizer* tokenizer, std::string& why) {
    std::vector<std::int32_t> ids;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        std::size_t start = i;
        while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        if (start == i) break;
        std::string_view token(text.data() + start, i - start);
        auto v = protocol::parse_u64(token);
        if (!v) {
            why = "ids=1: '" + protocol::printable(token) + "' is not a token id";
            return std::nullopt;
        }
        if (*v >= static_cast<std::uint64_t>(vocab)) {
            why = "ids=1: token id " + std::string(token) + " is outside the vocabulary (0.." +
                  std::to_string(vocab - 1) + ")";
            return std::nullopt;
        }
        if (tokenizer && !tokenizer->has(static_cast<std::int32_t>(*v))) {
            why = "ids=1: token id " + std::string(token) + " is not in the tokenizer";
            return std::nullopt;
        }
        ids.push_back(static_cast<std::int32_t>(*v));
    }
    return ids;
}

}  // namespace

struct Scheduler::Active {
    protocol::Submit request;
    int slot = 0;
    std::vector<std::int32_t> prompt;
    std::string audio;
    forward::AudioCursor cursor;
    std::int64_t reused = 0;
    // Turn boundaries past the reused prefix, ascending: each ends a prefill chunk and is
    // pinned once fed (PinPool), so a later regenerated, edited or branched turn resumes there.
    std::vector<std::int64_t> boundaries;
    std::size_t next_boundary = 0;
    std::int64_t fed = 0;       // prompt tokens fed so far (reused ones included)
    std::int64_t budget = 0;    // tokens it may generate (max_tokens clamped to the room left)
    std::int64_t emitted = 0;
    bool decoding = false;
    bool held = false;          // --fault-hold-after: no rounds until STOP or CANCEL
    std::int32_t pending = 0;   // the sampled token to feed next
    std::vector<std::int32_t> history;  // prompt + generated, for the repetition penalty
    std::vector<float> last_row;        // logits of the previous prompt row (ECHO needs it)
    std::uint64_t last_prefill_round = 0;
    std::uint64_t cache_hits0 = 0, cache_misses0 = 0;  // the expert cache's counters at ACCEPT
    sampling::Sampler sampler;
    std::unique_ptr<sampling::GrammarSession> constraint;  // grammar=N: masks every sampled token
    Clock::time_point accepted_at, first_token_at, prefill_done_at;

    Active(const protocol::Submit& r, const sampling::Params& p) : request(r), sampler(p) {}
    bool prefilling() const { return !decoding; }
};

Scheduler::Scheduler(const model::Model& model, const model::Tokenizer* tokenizer, cpu::ThreadPool& pool,
                     const ServeOptions& options, std::shared_ptr<experts::ExpertCache> cache)
    : model_(model), tokenizer_(tokenizer), options_(options), forward_(model, pool, std::move(cache)),
      pins_(options.pins, options.snapshot_bytes) {
    for (int i = 0; i < options.slots; ++i) slots_.push_back(forward::make_session(model.config, options.context));
    const std::size_t each = PinPool::state_bytes(model.config, options.context);
    if (pins_.enabled() && each > options.snapshot_bytes)
        std::fprintf(stderr, "[serve] one snapshot of this model is %.1f MiB, more than the snapshot budget of %.1f MiB: "
                     "none is kept, so regenerated and edited turns prefill in full (raise --snapshot-mb)\n",
                     static_cast<double>(each) / (1 << 20), static_cast<double>(options.snapshot_bytes) / (1 << 20));
}

Scheduler::~Scheduler() = default;

std::string Scheduler::token_text(std::int32_t id) const {
    // Prompt ids were checked at SUBMIT; a sampled id the tokenizer lacks (a model whose
    // unpadded vocabulary is larger than its tokenizer's) throws, and that request alone
    // ends with ERROR INTERNAL (run_round).
    if (tokenizer_) return tokenizer_->token_bytes(id);
    return std::to_string(id) + " ";
}

void Scheduler::abort(const std::string& id, const std::string& why, FrameSink& out) {
    for (auto& [_, a] : active_)
        if (a->request.id == id) return fail(*a, why, out);
    out.send(protocol::Error{id, ErrorCode::Internal, why});
}

void Scheduler::fail_all(const std::string& why, FrameSink& out) {
    while (!active_.empty()) fail(*active_.begin()->second, why, out);
}

void Scheduler::erase(const std::string& id) {
    for (auto it = active_.begin(); it != active_.end(); ++it)
        if (it->second->request.id == id) {
            active_.erase(it);
            return;
        }
}

void Scheduler::submit(const protocol::Submit& r, FrameSink& out) {
    // Whatever throws while admitting (a tokenizer, an allocation) ends this request with
    // ERROR INTERNAL, whether or not it was accepted; the engine serves on.
    bool admitted = false;
    try {
        admit(r, out, admitted);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "[serve] id=%s internal error while admitting: %s\n", r.id.c_str(), e.what());
        if (admitted) abort(r.id, e.what(), out);
        else out.send(protocol::Error{r.id, ErrorCode::Internal, e.what()});
    }
}

void Scheduler::admit(const protocol::Submit& r, FrameSink& out, bool& admitted) {
    const auto& c = model_.config;
    if (!options_.fault_kill_once_file.empty() && !std::filesystem::exists(options_.fault_kill_once_file)) {
        std::ofstream(options_.fault_kill_once_file) << "killed\n";
        std::fprintf(stderr, "[serve] fault injection: dying before ACCEPT of %s\n", r.id.c_str());
        platform::die_now();
    }
    auto error = [&](ErrorCode code, std::string detail) { out.send(protocol::Error{r.id, code, std::move(detail)}); };
    // DUPLICATE_ID first: any other refusal would carry the id of the request in flight,
    // and an ERROR with that id ends it for the client (PROTOCOL.md §7.4).
    for (const auto& [_, a] : active_)
        if (a->request.id == r.id) return error(ErrorCode::DuplicateId, "id " + r.id + " is in flight");
    if (r.slot >= static_cast<std::uint32_t>(options_.slots))
        return error(ErrorCode::BadRequest, "slot " + std::to_string(r.slot) + " is outside 0.." +
                                                std::to_string(options_.slots - 1));
    if (active_.count(static_cast<int>(r.slot)))
        return error(ErrorCode::SlotBusy,
                     "slot " + std::to_string(r.slot) + " is serving " + active_.at(static_cast<int>(r.slot))->request.id);
    if (r.prompt.empty()) return error(ErrorCode::EmptyPrompt, "the prompt is empty");

    std::vector<std::int32_t> prompt;
    if (r.options.ids) {
        std::string why;
        auto ids = parse_id_prompt(r.prompt, c.unpadded_vocab, tokenizer_, why);
        if (!ids) return error(ErrorCode::BadRequest, why);
        prompt = std::move(*ids);
    } else {
        if (!tokenizer_)
            return error(ErrorCode::NotSupported, "this model has no tokenizer.json: send token ids with ids=1");
        prompt = tokenizer_->encode(r.prompt);
    }
    if (prompt.empty()) return error(ErrorCode::EmptyPrompt, "the prompt has no tokens");

    // Audio: one DMel frame per <|audio|> placeholder, in order.
    const std::int64_t placeholders = std::count(prompt.begin(), prompt.end(), c.audio_token);
    if (!r.extension.empty() || placeholders > 0) {
        if (!r.extension.empty() && !model_.weights.audio_encoder)
            return error(ErrorCode::NotSupported, "this model has no audio tower (model.audio.* or audio.safetensors)");
        const std::int64_t bins = c.mel_bins, frames = static_cast<std::int64_t>(r.extension.size()) / bins;
        if (static_cast<std::int64_t>(r.extension.size()) % bins != 0)
            return error(ErrorCode::AudioMismatch, "extension of " + std::to_string(r.extension.size()) +
                                                       " bytes is not a whole number of " + std::to_string(bins) +
                                                       "-byte DMel frames");
        if (!r.extension.empty() && frames != placeholders)
            return error(ErrorCode::AudioMismatch, "frames=" + std::to_string(frames) +
                                                       " placeholders=" + std::to_string(placeholders));
        // DMel levels are 0..mel_vocab-1 (PROTOCOL.md §12.2): a byte past them is refused,
        // never clamped into a level the client did not send.
        for (std::size_t i = 0; i < r.extension.size(); ++i)
            if (static_cast<unsigned char>(r.extension[i]) >= static_cast<unsigned>(c.mel_vocab))
                return error(ErrorCode::AudioMismatch,
                             "DMel byte " + std::to_string(static_cast<unsigned char>(r.extension[i])) + " at offset " +
                                 std::to_string(i) + " is not a level (0.." + std::to_string(c.mel_vocab - 1) + ")");
    }
    // grammar=N (PROTOCOL.md §12.3): compiled (or found compiled) before ACCEPT, so a
    // schema the compiler refuses is a BAD_REQUEST naming the construct.
    std::shared_ptr<sampling::CompiledGrammar> constraint;
    if (!r.grammar.empty()) {
        if (!tokenizer_)
            return error(ErrorCode::NotSupported, "grammar: constrained decoding needs the model's tokenizer.json");
        try {
            constraint = grammars().get(r.grammar);
        } catch (const grammar::Error& e) {
            return error(ErrorCode::BadRequest, e.what());
        }
    }
    const std::int64_t P = static_cast<std::int64_t>(prompt.size());
    if (P >= options_.context)
        return error(ErrorCode::ContextExceeded,
                     "prompt_tokens=" + std::to_string(P) + " requested=" +
                         std::to_string(P + static_cast<std::int64_t>(r.max_tokens)) +
                         " capacity=" + std::to_string(options_.context));

    sampling::Params sp;
    sp.temperature = r.temperature;
    sp.top_p = r.top_p;
    sp.top_k = r.options.top_k;
    sp.repetition_penalty = r.options.repetition_penalty;
    sp.seed = r.options.seed ? *r.options.seed : std::random_device{}();
    auto a = std::make_unique<Active>(r, sp);
    a->slot = static_cast<int>(r.slot);
    a->prompt = std::move(prompt);
    a->audio = r.extension;
    a->cursor = {std::span(reinterpret_cast<const std::uint8_t*>(a->audio.data()), a->audio.size()), 0};
    a->budget = std::min<std::int64_t>(static_cast<std::int64_t>(r.max_tokens), options_.context - P);
    a->history = a->prompt;
    if (constraint) a->constraint = std::make_unique<sampling::GrammarSession>(std::move(constraint));
    a->accepted_at = Clock::now();
    if (const auto* cache = forward_.expert_cache()) {
        const auto k = cache->counters();
        a->cache_hits0 = k.hits;
        a->cache_misses0 = k.misses;
    }

    // Reuse: the slot's record is a strict prefix of this prompt (never across audio, never
    // for a prompt read-out, which needs every position), else the deepest pinned snapshot.
    forward::SessionState& st = slots_[a->slot];
    if (r.options.reset) {
        st.reset();
        pins_.drop_slot(a->slot);
    }
    const bool may_reuse = a->audio.empty() && r.options.logprobs == 0;
    const std::int64_t have = static_cast<std::int64_t>(st.fed.size());
    if (may_reuse && !st.tainted && have > 0 && have < P && std::equal(st.fed.begin(), st.fed.end(), a->prompt.begin())) {
        a->reused = have;
    } else if (auto depth = may_reuse ? pins_.restore(a->slot, a->prompt, st) : std::nullopt) {
        a->reused = *depth;
    } else {
        st.reset();
    }
    a->fed = a->reused;
    // The snapshots of this slot past what it keeps that this prompt overwrites are gone.
    pins_.drop_diverged(a->slot, a->prompt, a->reused);
    if (pins_.enabled() && !options_.turn_tokens.empty())
        for (std::int64_t i = std::max<std::int64_t>(1, a->reused); i < P; ++i)
            if (std::find(options_.turn_tokens.begin(), options_.turn_tokens.end(), a->prompt[i]) !=
                options_.turn_tokens.end())
                a->boundaries.push_back(i);
    // A message that opens right where the reused prefix ends (a follow-up after the slot's
    // answer): the state there is the slot's now.
    if (!a->boundaries.empty() && a->boundaries.front() == a->reused) {
        pins_.pin(a->slot, st, c);
        a->next_boundary = 1;
    }
    Active& accepted = *a;
    active_.emplace(a->slot, std::move(a));
    admitted = true;
    out.send(protocol::Accept{r.id, static_cast<std::uint64_t>(P), static_cast<std::uint64_t>(accepted.reused)});
    if (r.options.logprobs > 0 && P > 0) {
        // Position 0 has nothing to condition on.
        out.send(protocol::Echo{r.id, 0, token_text(accepted.prompt[0]), protocol::TokenLogprobs{std::nan(""), {}}});
    }
}

void Scheduler::stop(const std::string& id, FrameSink& out) {
    for (auto& [_, a] : active_)
        if (a->request.id == id) {
            finish(*a, false, out);
            return;
        }
    out.send(protocol::Error{id, ErrorCode::NotFound, "no request " + id + " in flight"});
}

void Scheduler::cancel(const std::string& id, FrameSink& out) {
    for (auto& [_, a] : active_)
        if (a->request.id == id) {
            erase(id);
            out.send(protocol::Error{id, ErrorCode::Cancelled, ""});
            return;
        }
    out.send(protocol::Error{id, ErrorCode::NotFound, "no request " + id + " in flight"});
}

protocol::TokenLogprobs Scheduler::logprobs_of(const float* logits, std::int32_t chosen, std::uint32_t k) const {
    const std::int64_t U = model_.config.unpadded_vocab;
    const double log_z = sampling::log_sum_exp(std::span(logits, static_cast<std::size_t>(U)));
    protocol::TokenLogprobs lp{static_cast<double>(logits[chosen]) - log_z, {}};
    for (std::int32_t i : sampling::largest(std::span(logits, static_cast<std::size_t>(U)), k))
        lp.top.emplace_back(static_cast<std::uint32_t>(i), static_cast<double>(logits[i]) - log_z);
    return lp;
}

// A row of logits for `a`'s next token: sample, emit, and finish when it is time.
void Scheduler::on_logits(Active& a, const float* logits, FrameSink& out) {
    const std::int64_t U = model_.config.unpadded_vocab;
    const std::span<const float> row(logits, static_cast<std::size_t>(U));
    const std::int32_t t = a.constraint ? a.constraint->next(a.sampler, row, a.history, a.request.temperature <= 0)
                                        : a.sampler.next(row, a.history);
    if (a.emitted == 0) a.first_token_at = Clock::now();
    if (t == model_.config.eos) return finish(a, false, out);
    protocol::Data d{a.request.id, token_text(t), std::nullopt};
    if (a.request.options.logprobs > 0) d.logprobs = logprobs_of(logits, t, a.request.options.logprobs);
    if (a.request.options.data_logprobs > 0) {
        // The alternatives' text too: a client without the tokenizer has only ids.
        d.logprobs = logprobs_of(logits, t, a.request.options.data_logprobs);
        // An alternative the tokenizer lacks (ids past its table) has no bytes, rather than
        // ending a request whose own tokens are fine.
        for (const auto& [id, _] : d.logprobs->top) {
            std::string bytes;
            try {
                bytes = token_text(static_cast<std::int32_t>(id));
            } catch (const std::exception&) {
            }
            d.logprobs->top_bytes.push_back(std::move(bytes));
        }
    }
    out.send(d);
    ++a.emitted;
    ++tokens_generated_;
    a.history.push_back(t);
    if (a.emitted >= a.budget) return finish(a, true, out);
    a.pending = t;
    a.decoding = true;
    if (options_.fault_hold_after > 0 && a.emitted >= options_.fault_hold_after) {
        std::fprintf(stderr, "[serve] fault injection: holding %s after %lld tokens until STOP or CANCEL\n",
                     a.request.id.c_str(), static_cast<long long>(a.emitted));
        a.held = true;
    }
}

void Scheduler::finish(Active& a, bool length_limited, FrameSink& out) {
    const auto now = Clock::now();
    const auto prefill_end = a.prefill_done_at.time_since_epoch().count() ? a.prefill_done_at : now;
    const double prefill_ms = ms_between(a.accepted_at, prefill_end);
    const double decode_ms = ms_between(prefill_end, now);
    const double tok_s = a.emitted > 1 && decode_ms > 0 ? (a.emitted - 1) / (decode_ms / 1000.0) : 0.0;
    const double ttft = a.emitted > 0 ? ms_between(a.accepted_at, a.first_token_at) : 0.0;
    // The expert cache's hit rate over the rounds this request was in (shared with the
    // requests batched with it); a mapped model has every expert at hand.
    double hit_pct = 100.0;
    if (const auto* cache = forward_.expert_cache()) {
        const auto k = cache->counters();
        const std::uint64_t hits = k.hits - a.cache_hits0, misses = k.misses - a.cache_misses0;
        if (hits + misses > 0) hit_pct = 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses);
    }
    protocol::DoneStats s{static_cast<std::uint64_t>(a.emitted), tok_s, hit_pct, resident_gb(),
                          static_cast<std::uint64_t>(a.prompt.size()), length_limited,
                          {{"reused", std::to_string(a.reused)},
                           {"ttft_ms", protocol::format_fixed(ttft, 1)},
                           {"prefill_ms", protocol::format_fixed(prefill_ms, 1)},
                           {"decode_ms", protocol::format_fixed(decode_ms, 1)}}};
    if (decode_ms > 0 && a.emitted > 1) last_decode_tok_s_ = tok_s;
    const std::int64_t prefilled = static_cast<std::int64_t>(a.prompt.size()) - a.reused;
    if (prefill_ms > 0 && prefilled > 0) last_prefill_tok_s_ = prefilled / (prefill_ms / 1000.0);
    ++requests_done_;
    prompt_tokens_ += a.prompt.size();
    tokens_reused_ += static_cast<std::uint64_t>(a.reused);
    std::string id = a.request.id;
    out.send(protocol::Done{id, s});
    erase(id);  // `a` is gone from here on
    out.send(protocol::Stats{json_text(stats())});
    if (options_.fault_device_lost_after > 0 && requests_done_ == static_cast<std::uint64_t>(options_.fault_device_lost_after)) {
        std::fprintf(stderr, "[serve] fault injection: reporting a lost device\n");
        out.send(protocol::Event{R"j({"kind":"device_lost","detail":"fault injection (--fault-device-lost-after)"})j"});
    }
}

void Scheduler::fail(Active& a, const std::string& why, FrameSink& out) {
    std::string id = a.request.id;
    slots_[a.slot].reset();
    pins_.drop_slot(a.slot);
    erase(id);
    out.send(protocol::Error{id, ErrorCode::Internal, why});
}

void Scheduler::run_round(FrameSink& out) {
    if (active_.empty()) return;
    ++rounds_;
    std::vector<forward::Block> blocks;
    std::vector<Active*> owners;
    Active* prefill = nullptr;
    for (auto& [slot, a] : active_) {
        if (a->held) continue;
        if (a->decoding) {
            blocks.push_back({&slots_[slot], std::span(&a->pending, 1), nullptr, false});
            owners.push_back(a.get());
        } else if (!prefill || a->last_prefill_round < prefill->last_prefill_round) {
            prefill = a.get();  // the one served least recently
        }
    }
    std::int64_t chunk_start = 0, chunk = 0;
    if (prefill) {
        chunk_start = prefill->fed;
        chunk = std::min<std::int64_t>(options_.prefill_chunk, static_cast<std::int64_t>(prefill->prompt.size()) - chunk_start);
        // A chunk ends at the next turn boundary, so the state there can be pinned.
        if (prefill->next_boundary < prefill->boundaries.size())
            chunk = std::min(chunk, prefill->boundaries[prefill->next_boundary] - chunk_start);
        prefill->last_prefill_round = rounds_;
        blocks.push_back({&slots_[prefill->slot], std::span(prefill->prompt).subspan(chunk_start, chunk),
                          prefill->audio.empty() ? nullptr : &prefill->cursor, prefill->request.options.logprobs > 0});
        owners.push_back(prefill);
    }
    if (blocks.empty()) {
        // Every request in flight is held (--fault-hold-after): idle a little per round, so
        // the loop reads its STOP or CANCEL without spinning a core.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
    }
    std::vector<std::vector<float>> logits;
    try {
        logits = forward_.step_batch(blocks);
    } catch (const std::exception& e) {
        for (Active* a : owners) fail(*a, e.what(), out);
        return;
    }
    // The step finished on the CPU after the device was lost: tell the gateway, which
    // restarts the engine at a quiet moment to get the device back.
    if (const std::string lost = forward_.take_device_event(); !lost.empty())
        out.send(protocol::Event{json_text({{"kind", "device_lost"}, {"detail", lost}})});
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        // A throw while emitting one request's frames (a sampled id the tokenizer cannot
        // decode) ends that request alone; `a` may be gone by then, so look it up by id.
        const std::string id = owners[b]->request.id;
        try {
            emit(*owners[b], owners[b] == prefill, logits[b], chunk_start, chunk, out);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "[serve] id=%s internal error: %s\n", id.c_str(), e.what());
            for (auto& [_, a] : active_)
                if (a->request.id == id) {
                    fail(*a, e.what(), out);
                    break;
                }
        }
    }
}

// One request's share of a round: its ECHO frames and, once its prompt is in, its next
// token (`prefilled`: this round fed a chunk of its prompt rather than its last token).
void Scheduler::emit(Active& a, bool prefilled, const std::vector<float>& row, std::int64_t chunk_start,
                     std::int64_t chunk, FrameSink& out) {
    const std::int64_t U = model_.config.unpadded_vocab;
    if (!prefilled) return on_logits(a, row.data(), out);
    a.fed += chunk;
    const std::string& id = a.request.id;
    if (a.request.options.logprobs > 0) {
        // ECHO for each position p of this chunk: prompt[p] under row p-1's logits.
        for (std::int64_t i = 0; i < chunk; ++i) {
            const std::int64_t pos = chunk_start + i;
            if (pos > 0 && i > 0) {
                const float* prev = row.data() + (i - 1) * U;
                out.send(protocol::Echo{id, static_cast<std::uint64_t>(pos), token_text(a.prompt[pos]),
                                        logprobs_of(prev, a.prompt[pos], a.request.options.logprobs)});
            } else if (pos > 0) {
                out.send(protocol::Echo{id, static_cast<std::uint64_t>(pos), token_text(a.prompt[pos]),
                                        logprobs_of(a.last_row.data(), a.prompt[pos], a.request.options.logprobs)});
            }
        }
        a.last_row.assign(row.end() - U, row.end());
    }
    if (a.next_boundary < a.boundaries.size() && a.fed == a.boundaries[a.next_boundary]) {
        pins_.pin(a.slot, slots_[a.slot], model_.config);
        ++a.next_boundary;
    }
    if (a.fed < static_cast<std::int64_t>(a.prompt.size())) return;
    a.prefill_done_at = Clock::now();
    if (a.request.options.pin) pins_.pin(a.slot, slots_[a.slot], model_.config);
    if (a.request.max_tokens == 0) return finish(a, false, out);  // a prompt read-out only
    on_logits(a, row.data() + row.size() - U, out);
}

nlohmann::json Scheduler::info() const {
    const auto& c = model_.config;
    return {{"kind", "info"},
            {"model", model_.dir.filename().string()},
            {"backend", forward_.chain() ? "vulkan" : "cpu"},
            {"isa", cpu::isa_name(cpu::active_isa())},
            {"kernels", {{"bf16", cpu::active_kernels().bf16}, {"int8", cpu::active_kernels().int8},
                         {"int4", cpu::active_kernels().int4}}},
            {"slots", options_.slots},
            {"context", options_.context},
            {"vocab", c.unpadded_vocab},
            {"layers", c.layers},
            {"eos", c.eos},
            {"audio", model_.weights.audio_encoder.has_value()},
            {"audio_token", c.audio_token},
            {"mel_bins", c.mel_bins},
            {"tokenizer", tokenizer_ != nullptr},
            {"weights_bytes", model_.weights.matrix_bytes},
            {"snapshot_bytes", PinPool::state_bytes(c, options_.context)},
            {"device", vulkan::device_stats(forward_.chain(), 0)}};
}

nlohmann::json Scheduler::stats() const {
    nlohmann::json slots = nlohmann::json::array();
    for (int i = 0; i < options_.slots; ++i) {
        auto it = active_.find(i);
        slots.push_back({{"slot", i},
                         {"busy", it != active_.end()},
                         {"request", it != active_.end() ? it->second->request.id : ""},
                         {"positions", slots_[i].len},
                         {"tainted", slots_[i].tainted}});
    }
    return {{"kind", "stats"},
            {"backend", forward_.chain() ? "vulkan" : "cpu"},
            {"rss_gb", resident_gb()},
            {"active", active_.size()},
            {"slots", slots},
            {"pins", pins_.size()},
            {"snapshots", pins_.stats()},
            {"requests_done", requests_done_},
            {"tokens_generated", tokens_generated_},
            {"prompt_tokens", prompt_tokens_},
            {"prompt_tokens_reused", tokens_reused_},
            {"decode_tok_s", last_decode_tok_s_},
            {"prefill_tok_s", last_prefill_tok_s_},
            {"expert_cache", expert_cache_stats()},
            {"experts", expert_residency(model_, forward_.expert_uses(), forward_.expert_cache(),
                                         forward_.chain() ? forward_.chain()->tier() : nullptr)},
            {"phases_ms", phases_ms()},
            {"device", vulkan::device_stats(forward_.chain(), tokens_generated_ + prompt_tokens_)}};
}

nlohmann::json Scheduler::phases_ms() const {
    const auto& p = forward_.phase_times();
    return {{"embed", p.embed * 1e3},   {"attention", p.attention * 1e3}, {"router", p.router * 1e3},
            {"experts", p.experts * 1e3}, {"expert_io", p.expert_io * 1e3}, {"dense_mlp", p.dense * 1e3},
            {"convs_norms", p.convs_norms * 1e3}, {"lm_head", p.head * 1e3}};
}

sampling::GrammarLibrary& Scheduler::grammars() {
    if (!grammars_)
        grammars_ = std::make_unique<sampling::GrammarLibrary>(
            *tokenizer_, static_cast<std::size_t>(model_.config.unpadded_vocab), model_.config.eos);
    return *grammars_;
}

nlohmann::json Scheduler::expert_cache_stats() const {
    const auto* cache = forward_.expert_cache();
    // A mapped model: every expert is memory-mapped with it, no cache misses to count.
    if (!cache) return {{"mode", "mmap"}, {"hit_pct", 100.0}};
    const auto k = cache->counters();
    return {{"mode", "cache"},           {"cap", cache->cap()},       {"pinned", cache->pinned_total()},
            {"hits", k.hits},            {"misses", k.misses},        {"hit_pct", k.hit_pct()},
            {"bytes_read", k.bytes_read}, {"read_ms", k.read_s * 1e3}, {"warmed", k.warmed},
            {"warm_pending", cache->warm_pending()}};
}

protocol::Submit ids_request(const std::string& id, int slot, const std::vector<std::int32_t>& ids, int max_tokens) {
    protocol::Submit s;
    s.id = id;
    s.slot = static_cast<std::uint32_t>(slot);
    s.max_tokens = static_cast<std::uint64_t>(max_tokens);
    s.temperature = 0;
    s.top_p = 1;
    for (auto t : ids) s.prompt += std::to_string(t) + " ";
    s.options.ids = true;
    return s;
}

double resident_gb() {
    return static_cast<double>(platform::resident_bytes()) / 1e9;
}

}  // namespace inkling::serve
