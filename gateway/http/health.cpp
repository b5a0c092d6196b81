// What a balancer, a scraper and the web UI ask: /health (every model's, 503 while one is not
// serving), /health/{model}, /metrics (Prometheus text: the gateway's figures, then each
// model's and its engine's) and /v1/stats (the same as JSON).
#include <algorithm>
#include <cmath>
#include <optional>

#include "gateway/api/api_error.h"
#include "gateway/http/connection.h"
#include "gateway/http/routes.h"
#include "gateway/http/server.h"

namespace inkling::gateway {

using Response = http::response<http::string_body>;
using Clock = std::chrono::steady_clock;

void Server::health_state(int& status, int& retry_after, nlohmann::json& body, const Model* only) const {
    // 200 while every model (or `only`) is healthy: ready, unloaded (its first request loads
    // it) or loading on demand; 503 while one is starting, restarting, failed or draining.
    const Model* bad = nullptr;
    double next = 0;
    nlohmann::json models = nlohmann::json::object();
    for (const auto& m : models_.all()) {
        if (only && m.get() != only) continue;
        models[m->id] = {{"status", m->status()}};
        if (!m->healthy()) {
            if (!bad) bad = m.get();
            next = std::max(next, m->engine.seconds_to_next_attempt());
        }
    }
    status = !bad && accepting_ ? 200 : 503;
    retry_after = status == 200 ? 0 : std::max(1, static_cast<int>(std::ceil(next)));
    body = {{"status", status == 200 ? "ok" : !accepting_ ? "draining" : bad->status()}};
    if (status != 200) {
        const std::string why = bad ? bad->engine.reason() : "";
        body["reason"] = bad && models_.all().size() > 1 ? "model " + bad->id + (why.empty() ? "" : ": " + why) : why;
        if (next > 0) body["retry_in_s"] = std::round(next * 10) / 10;
    }
    body["models"] = std::move(models);
}

awaitable<bool> Server::on_health(Call& call) {
    int status = 0, retry = 0;
    nlohmann::json body;
    health_state(status, retry, body);
    if (authorized(call.req)) {
        for (const auto& m : models_.all())
            body["models"][m->id].update({{"pid", m->engine.pid()}, {"restarts", m->engine.restarts()}});
        const Model& first = *models_.all().front();
        if (status == 200) body["engine"] = {{"pid", first.engine.pid()}, {"restarts", first.engine.restarts()}};
    }
    co_await write_json(call.c, call.req, status, body, "health", retry);
    co_return true;
}

// /health/{model}: that model's health alone (a balancer that routes by model checks it).
awaitable<bool> Server::on_model_health(Call& call) {
    const std::string id = call.path.substr(std::string_view("/health/").size());
    const Model* m = models_.find(id);
    if (!m) throw model_not_found("The model '" + id + "' does not exist");
    int status = 0, retry = 0;
    nlohmann::json body;
    health_state(status, retry, body, m);
    if (authorized(call.req)) body["models"][id].update({{"pid", m->engine.pid()}, {"restarts", m->engine.restarts()}});
    co_await write_json(call.c, call.req, status, body, "health", retry);
    co_return true;
}

namespace {

// The engine's STATS as it sent them: a field of another type is left out.
std::optional<double> number(const nlohmann::json& j, const char* outer, const char* inner) {
    if (!j.is_object() || !j.contains(outer)) return std::nullopt;
    const nlohmann::json* v = &j[outer];
    if (inner) {
        if (!v->is_object() || !v->contains(inner)) return std::nullopt;
        v = &(*v)[inner];
    }
    return v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

// The model's own counters.
struct ModelCounter {
    const char *name, *help;
    Counter Model::*counter;
};
constexpr ModelCounter kModelCounters[] = {
    {"inkling_model_requests_total", "Generation requests for the model.", &Model::requests},
    {"inkling_model_prompt_tokens_total", "Prompt tokens of the model's requests.", &Model::prompt_tokens},
    {"inkling_model_cached_tokens_total", "Of those, reused from a slot's prefix (not prefilled).", &Model::cached_tokens},
    {"inkling_model_completion_tokens_total", "Tokens the model generated.", &Model::completion_tokens},
    {"inkling_model_loads_total", "Times the model's engine was started (at start-up or on demand).", &Model::loads},
    {"inkling_model_unloads_total", "Times it was stopped (idle, or to make room under the budget).", &Model::unloads},
};

// The Vulkan chain's figures (docs/vulkan.md, STATS), as the engine's last STATS has them.
struct DeviceFigure {
    const char *name, *type, *help, *field;
};
constexpr DeviceFigure kDevice[] = {
    {"inkling_device_expert_bytes", "gauge", "Device memory the routed experts' slots hold (the tier's share).",
     "expert_bytes"},
    {"inkling_device_expert_layers", "gauge", "MoE layers with every routed expert on the device (resident).",
     "expert_layers"},
    {"inkling_device_tier_layers", "gauge", "MoE layers with device slots for routed experts (resident or a tier).",
     "tier_layers"},
    {"inkling_device_tier_slots", "gauge", "Device slots for routed experts, over every MoE layer.", "tier_slots"},
    {"inkling_device_tier_uploads_total", "counter", "Experts uploaded into the tier's slots (the first fill not counted).",
     "tier_uploads"},
    {"inkling_device_tier_evictions_total", "counter", "Experts the tier evicted from their slots.", "tier_evictions"},
    {"inkling_device_expert_pairs_total", "counter", "Routed (row, expert) pairs computed on the device.",
     "device_pairs"},
    {"inkling_host_expert_pairs_total", "counter", "Routed (row, expert) pairs the host computed beside the device.",
     "host_pairs"},
    {"inkling_device_streamed_experts_total", "counter",
     "Experts the tier lacked that were streamed to the device for one step (a prompt chunk's cold experts).",
     "tier_streamed"},
    {"inkling_device_streamed_pairs_total", "counter", "Routed pairs of streamed experts (of the device's pairs).",
     "stream_pairs"},
    {"inkling_device_steps_total", "counter", "Steps the device ran to their end.", "steps"},
    {"inkling_device_frames_per_step", "gauge", "Device submits a step (a decode step: one token a session).",
     "frames_per_step"},
    {"inkling_device_waits_per_step", "gauge", "Host waits for the device a step.", "waits_per_step"},
};

}  // namespace

awaitable<bool> Server::on_metrics(Call& call) {
    double queued = 0, active = 0;
    for (const auto& m : models_.all()) {
        queued += m->slots.queued();
        active += m->slots.active();
    }
    metrics_.queue_depth = queued;
    metrics_.active = active;
    PrometheusText out;
    metrics_.write(out);
    // Per model, with a model label. A family is written only with a sample: Prometheus
    // rejects a HELP line with nothing under it in some versions.
    auto per_model = [&](const std::string& name, const char* type, const std::string& help, auto value) {
        std::vector<std::pair<std::string, double>> samples;
        for (const auto& m : models_.all())
            if (auto v = value(*m)) samples.emplace_back(m->id, *v);
        if (samples.empty()) return;
        out.family(name, type, help);
        for (const auto& [id, v] : samples) out.sample(name, "model=\"" + id + "\"", v);
    };
    using Opt = std::optional<double>;
    int status = 0, retry = 0;
    nlohmann::json health;
    health_state(status, retry, health);
    out.gauge("inkling_engine_up", "1 while /health answers 200 (every model ready, unloaded or loading on demand).",
              status == 200 ? 1 : 0);
    per_model("inkling_model_up", "gauge", "1 while the model's engine is ready.",
              [](const Model& m) { return Opt(m.engine.state() == EngineSupervisor::State::Ready); });
    per_model("inkling_model_loaded", "gauge", "1 while an engine runs for the model (loading, ready or restarting).",
              [](const Model& m) { return Opt(m.engine.state() != EngineSupervisor::State::Stopped); });
    for (const ModelCounter& k : kModelCounters)
        per_model(k.name, "counter", k.help, [&](const Model& m) { return Opt((m.*k.counter).value); });
    per_model("inkling_model_queue_depth", "gauge", "The model's requests waiting for a slot.",
              [](const Model& m) { return Opt(m.slots.queued()); });
    per_model("inkling_model_requests_active", "gauge", "The model's requests being served.",
              [](const Model& m) { return Opt(m.slots.active()); });
    per_model("inkling_expert_cache_hit_ratio", "gauge", "Expert cache hit rate (0-1).", [&](const Model& m) {
        auto v = number(m.engine.stats(), "expert_cache", "hit_pct");
        return v ? Opt(*v / 100.0) : Opt();
    });
    per_model("inkling_engine_resident_bytes", "gauge", "Engine resident set size.", [&](const Model& m) {
        auto v = number(m.engine.stats(), "rss_gb", nullptr);
        return v ? Opt(*v * 1e9) : Opt();
    });
    per_model("inkling_device_memory_used_bytes", "gauge", "Device memory in use.",
              [&](const Model& m) { return number(m.engine.stats(), "device", "memory_used"); });
    per_model("inkling_device_memory_budget_bytes", "gauge", "Device memory budget.",
              [&](const Model& m) { return number(m.engine.stats(), "device", "memory_budget"); });
    for (const DeviceFigure& d : kDevice)
        per_model(d.name, d.type, d.help, [&](const Model& m) { return number(m.engine.stats(), "device", d.field); });
    Response res{http::status::ok, call.req.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.keep_alive(call.req.keep_alive());
    res.body() = out.text();
    res.prepare_payload();
    metrics_.request("metrics", 200);
    co_await write(call.c, res);
    co_return true;
}

namespace {

nlohmann::json engine_json(const EngineSupervisor& e) {
    return {{"state", EngineSupervisor::state_name(e.state())},
            {"pid", e.pid()},
            {"restarts", e.restarts()},
            {"reason", e.reason()},
            {"retry_in_s", e.seconds_to_next_attempt()},
            {"last_stderr", e.last_stderr()},
            {"stderr_tail", e.stderr_tail()},
            {"info", e.info()},
            {"stats", e.stats()}};
}

}  // namespace

nlohmann::json Server::stats_json() const {
    int active = 0, queued = 0, slots = 0, restarts = 0, losses = 0;
    std::size_t entries = 0, capacity = 0, bytes = 0;
    nlohmann::json models = nlohmann::json::object();
    for (const auto& m : models_.all()) {
        active += m->slots.active();
        queued += m->slots.queued();
        slots += m->slots.slots();
        restarts += m->engine.restarts();
        losses += m->engine.device_losses();
        entries += m->affinity.size();
        capacity += m->affinity.capacity();
        bytes += m->affinity.bytes();
        models[m->id] = {{"status", m->status()},
                         {"bytes", m->bytes},
                         {"active", m->slots.active()},
                         {"queued", m->slots.queued()},
                         {"slots", m->slots.slots()},
                         {"requests", m->requests.value},
                         {"prompt_tokens", m->prompt_tokens.value},
                         {"cached_tokens", m->cached_tokens.value},
                         {"completion_tokens", m->completion_tokens.value},
                         {"loads", m->loads.value},
                         {"unloads", m->unloads.value},
                         {"engine", engine_json(m->engine)}};
    }
    const Model& first = *models_.all().front();
    return {{"gateway",
             {{"uptime_s", std::chrono::duration<double>(Clock::now() - started_).count()},
              {"requests_total", metrics_.requests_total()},
              {"active", active},
              {"queued", queued},
              {"queue_limit", first.slots.max_queue()},
              {"slots", slots},
              {"restarts", restarts},
              {"device_losses", losses},
              {"tokens_in", metrics_.tokens_in.value},
              {"tokens_out", metrics_.tokens_out.value},
              {"affinity", {{"entries", entries}, {"capacity", capacity}, {"bytes", bytes}}}}},
            // The first model's engine (the only one with one --model), as before several models.
            {"engine", engine_json(first.engine)},
            {"models", models}};
}

awaitable<bool> Server::on_stats(Call& call) {
    for (const auto& m : models_.all()) m->engine.request_stats();
    const nlohmann::json stats = stats_json();
    co_await write_json(call.c, call.req, 200, stats, "stats");
    co_return true;
}

}  // namespace inkling::gateway
