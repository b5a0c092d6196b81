// The models a gateway serves, each with its own supervised engine (EngineSupervisor), slot
// pool, slot-affinity map and counters, and the policy of which are resident
// (gateway/engines/residency.h): a model not loaded is started by its first request (which waits,
// bounded, while it loads), an idle one is stopped after --model-idle-timeout, and under
// --memory-budget a load first unloads idle models, least recently used first, or waits for
// one to become idle (bounded), then fails with 503 model_unavailable.
//
//   Model* m = models.find(id);
//   ModelUse use(*m);                                    // holds it resident while in scope
//   if (auto why = co_await models.make_resident(*m, deadline)) fail(*why);
//   co_await m->engine.wait_ready(deadline); …
//
// Everything runs on the gateway's one io_context thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/asio.h"
#include "gateway/engines/affinity_map.h"
#include "gateway/engines/engine_supervisor.h"
#include "gateway/engines/model_spec.h"
#include "gateway/engines/residency.h"
#include "gateway/engines/slot_pool.h"
#include "gateway/metrics.h"

namespace inkling::gateway {

struct Model {
    Model(asio::io_context& io, const ModelSpec& spec, EngineSupervisor::Options engine_options, int slots,
          int max_queue, std::size_t affinity_entries, Metrics& metrics);
    std::string id;
    std::uint64_t bytes;  // what it takes resident (ModelSpec::memory, else its files' size)
    EngineSupervisor engine;
    SlotPool slots;
    AffinityMap affinity;  // conversation → the slot that last served it
    SlotRecency recency;   // which slot a new conversation takes
    Counter requests, prompt_tokens, cached_tokens, completion_tokens, loads, unloads;
    int users = 0;         // requests that hold it or wait for it (ModelUse)
    bool loaded_on_demand = false;  // its engine was started by a request (not at start-up)
    std::chrono::steady_clock::time_point last_used = std::chrono::steady_clock::now();
    // Its status word for /health: ok, unloaded, loading, starting, restarting, failed, …
    std::string status() const;
    // Whether it counts as healthy: ready, unloaded (a request loads it), or loading on demand.
    bool healthy() const;
};

// A request's hold on a model: while any exists the model is never unloaded.
class ModelUse {
public:
    ModelUse(Model& m, Broadcast& changed) : m_(m), changed_(changed) { ++m_.users; }
    ~ModelUse();
    ModelUse(const ModelUse&) = delete;
    ModelUse& operator=(const ModelUse&) = delete;

private:
    Model& m_;
    Broadcast& changed_;
};

class Models {
public:
    struct Options {
        std::uint64_t budget = 0;                  // bytes resident at most; 0: no budget
        std::chrono::seconds idle_timeout{0};      // unload after this long unused; 0: never
        bool on_demand = false;                    // start no engine until its first request
    };
    Models(asio::io_context& io, Options options);
    // Adds a model (before start()); throws when its bytes are over the budget alone.
    void add(std::unique_ptr<Model> model);

    // Starts the engines that load at start-up (all, or as many as fit the budget, in order),
    // and the idle watch.
    void start();
    awaitable<void> shutdown();  // every resident engine drains and stops

    Model* find(const std::string& id);
    const std::vector<std::unique_ptr<Model>>& all() const { return models_; }
    std::vector<std::string> ids() const;
    Broadcast& changed() { return changed_; }

    // Makes `m` resident: starts its engine if none runs (unloading idle ones first when the
    // budget asks), waiting for an unload in progress or for room, until `deadline`. nullopt
    // when an engine runs for it (it may still be loading); else why not.
    awaitable<std::optional<std::string>> make_resident(Model& m, asio::steady_timer::time_point deadline);

private:
    std::vector<Residency> snapshot() const;
    void unload(Model& m, const char* why);
    void load(Model& m);
    awaitable<void> idle_watch();

    asio::io_context& io_;
    Options o_;
    std::vector<std::unique_ptr<Model>> models_;
    Broadcast changed_;
    bool stopping_ = false;
};

}  // namespace inkling::gateway
