#include "gateway/engines/models.h"

#include <cstdio>

namespace inkling::gateway {

using Clock = std::chrono::steady_clock;
using State = EngineSupervisor::State;

namespace {

std::string gigabytes(std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GB", static_cast<double>(bytes) / 1e9);
    return text;
}

}  // namespace

Model::Model(asio::io_context& io, const ModelSpec& spec, EngineSupervisor::Options engine_options, int slot_count,
             int max_queue, std::size_t affinity_entries, Metrics& metrics)
    : id(spec.id), bytes(spec.memory), engine(io, std::move(engine_options), metrics),
      slots(io.get_executor(), slot_count, max_queue), affinity(affinity_entries), recency(slot_count) {}

std::string Model::status() const {
    const State s = engine.state();
    if (s == State::Stopped) return "unloaded";
    if (engine.stopping()) return "unloading";
    if (s == State::Ready) return "ok";
    if (s == State::Starting && loaded_on_demand) return "loading";
    return EngineSupervisor::state_name(s);
}

bool Model::healthy() const {
    const std::string s = status();
    return s == "ok" || s == "unloaded" || s == "loading" || s == "unloading";
}

ModelUse::~ModelUse() {
    --m_.users;
    m_.last_used = Clock::now();
    changed_.notify_all();  // the idle watch and waiters for room look again
}

Models::Models(asio::io_context& io, Options options) : io_(io), o_(options), changed_(io.get_executor()) {}

void Models::add(std::unique_ptr<Model> model) {
    if (o_.budget && model->bytes > o_.budget)
        throw std::runtime_error("model '" + model->id + "' takes " + gigabytes(model->bytes) + ", more than --memory-budget (" +
                                 gigabytes(o_.budget) + ") alone");
    Model& m = *model;
    m.engine.on_change = [this, &m] {
        if (m.engine.state() == State::Ready) m.loaded_on_demand = false;  // a later restart is no load
        changed_.notify_all();
    };
    models_.push_back(std::move(model));
}

Model* Models::find(const std::string& id) {
    for (auto& m : models_)
        if (m->id == id) return m.get();
    return nullptr;
}

std::vector<std::string> Models::ids() const {
    std::vector<std::string> out;
    for (const auto& m : models_) out.push_back(m->id);
    return out;
}

std::vector<Residency> Models::snapshot() const {
    std::vector<Residency> out;
    for (const auto& m : models_) {
        Residency r;
        r.bytes = m->bytes;
        const State s = m->engine.state();
        r.resident = s != State::Stopped;
        r.unloadable = r.resident && m->users == 0 && !m->engine.stopping() && (s == State::Ready || s == State::Failed);
        r.last_used = m->last_used;
        out.push_back(r);
    }
    return out;
}

void Models::load(Model& m) {
    m.loads.inc();
    std::fprintf(stderr, "[gateway] model %s: loading\n", m.id.c_str());
    m.engine.start();
}

void Models::unload(Model& m, const char* why) {
    m.unloads.inc();
    std::fprintf(stderr, "[gateway] model %s: unloading (%s)\n", m.id.c_str(), why);
    asio::co_spawn(io_, m.engine.shutdown(), asio::detached);
}

void Models::start() {
    // With several models each engine's log lines name it: "[engine demo] starting -> ready".
    if (models_.size() > 1)
        for (auto& m : models_)
            m->engine.set_log([id = m->id](const std::string& line) {
                std::string named = line;
                if (named.starts_with("[engine]")) named.insert(7, " " + id);
                std::fprintf(stderr, "%s\n", named.c_str());
            });
    for (std::size_t i = 0; i < models_.size(); ++i) {
        if (o_.on_demand) break;
        const RoomPlan plan = make_room(snapshot(), i, o_.budget);
        if (plan.fits && plan.unload.empty()) load(*models_[i]);
        else std::fprintf(stderr, "[gateway] model %s: not loaded at start (--memory-budget %s); its first request loads it\n",
                          models_[i]->id.c_str(), gigabytes(o_.budget).c_str());
    }
    if (o_.idle_timeout.count() > 0) asio::co_spawn(io_, idle_watch(), asio::detached);
}

awaitable<std::optional<std::string>> Models::make_resident(Model& m, asio::steady_timer::time_point deadline) {
    std::size_t index = 0;
    while (models_[index].get() != &m) ++index;
    while (true) {
        if (stopping_) co_return "the gateway is shutting down";
        const State s = m.engine.state();
        if (s != State::Stopped && !m.engine.stopping()) co_return std::nullopt;  // loading, ready, restarting
        if (s == State::Stopped) {
            const RoomPlan plan = make_room(snapshot(), index, o_.budget);
            if (plan.fits && plan.unload.empty()) {
                m.loaded_on_demand = true;
                load(m);
                co_return std::nullopt;
            }
            // Room is made by unloading; the load follows once they have stopped (a change).
            for (std::size_t j : plan.unload) unload(*models_[j], ("to make room for " + m.id).c_str());
        }
        if (Clock::now() >= deadline) {
            if (s != State::Stopped) co_return "model '" + m.id + "' is still unloading";
            std::string held;
            for (const auto& other : models_)
                if (other.get() != &m && other->engine.state() != State::Stopped)
                    held += (held.empty() ? "" : ", ") + other->id + " (" + gigabytes(other->bytes) + ")";
            co_return "model '" + m.id + "' (" + gigabytes(m.bytes) + ") does not fit --memory-budget " +
                gigabytes(o_.budget) + " while models in use hold it: " + held;
        }
        co_await changed_.wait(deadline);
    }
}

awaitable<void> Models::idle_watch() {
    const auto timeout = std::chrono::duration_cast<Clock::duration>(o_.idle_timeout);
    while (!stopping_) {
        for (std::size_t i : idle_expired(snapshot(), Clock::now(), timeout)) {
            const std::string why = "idle for " + std::to_string(o_.idle_timeout.count()) + " s";
            unload(*models_[i], why.c_str());
        }
        co_await changed_.wait(next_idle_expiry(snapshot(), timeout));
    }
}

awaitable<void> Models::shutdown() {
    stopping_ = true;
    changed_.notify_all();
    for (auto& m : models_) asio::co_spawn(io_, m->engine.shutdown(), asio::detached);
    // Each supervisor bounds its own stop (EOF, then SIGKILL); this guards a lost exit report.
    const auto give_up = Clock::now() + std::chrono::seconds(60);
    auto all_stopped = [&] {
        for (const auto& m : models_)
            if (m->engine.state() != State::Stopped) return false;
        return true;
    };
    while (!all_stopped() && Clock::now() < give_up) co_await changed_.wait(give_up);
}

}  // namespace inkling::gateway
