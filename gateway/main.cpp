// build/inkling-gateway — the OpenAI-compatible HTTP gateway in front of one engine per model.
//
//   inkling-gateway --model DIR [--host 127.0.0.1] [--port 8000] [--api-key K] [--slots N] …
//   inkling-gateway --model demo=DIR --model small=DIR2 [--model-idle-timeout S] [--memory-budget B] …
//
// One process, one io_context thread: HTTP (Beast), the engine child's pipes (Process),
// timers. The engine does the heavy work in its own process. The flags and INKLING_API_KEY
// are declared in gateway/options.cpp (docs/configuration.md).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "protocol/cli/cxxopts.h"

#include "gateway/asio.h"
#include "gateway/engines/engine_supervisor.h"
#include "gateway/engines/model_spec.h"
#include "gateway/engines/models.h"
#include "gateway/http/server.h"
#include "gateway/metrics.h"
#include "gateway/options.h"
#include "protocol/binary_stdio.h"
#include "protocol/cli/cxxopts_bind.h"
#include "protocol/cli/env.h"
#include "protocol/limits.h"

using namespace inkling::gateway;
namespace fs = std::filesystem;

namespace {

bool is_loopback(const std::string& host) {
    return host == "127.0.0.1" || host == "::1" || host == "localhost" || host.starts_with("127.");
}

// What a model directory takes on disk: the bytes its engine maps or reads (the default
// of --model-memory).
std::uint64_t files_size(const fs::path& dir) {
    std::uint64_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) n += e.file_size();
    return n;
}

// --model and the per-model flags → one spec per model, named and sized.
std::vector<inkling::gateway::ModelSpec> model_specs(const cxxopts::ParseResult& args, int slots) {
    std::vector<ModelSpec> specs;
    for (const auto& v : args["model"].as<std::vector<std::string>>()) specs.push_back(parse_model_value(v));
    if (args.count("model-id")) {
        if (specs.size() != 1 || !specs[0].id.empty())
            throw std::runtime_error("--model-id names the one --model DIR; with several, write --model ID=DIR");
        specs[0].id = args["model-id"].as<std::string>();
    }
    for (auto& s : specs) {
        if (!fs::is_directory(s.dir)) throw std::runtime_error("--model " + s.dir + " is not a directory");
        if (s.id.empty()) s.id = fs::absolute(s.dir).lexically_normal().filename().string();
        if (s.id.empty()) s.id = fs::absolute(s.dir).lexically_normal().parent_path().filename().string();
        s.slots = slots;
    }
    check_model_ids(specs);
    auto each = [&](const char* flag, auto apply) {
        if (args.count(flag))
            for (const auto& v : args[flag].as<std::vector<std::string>>()) {
                auto o = model_option(specs, flag, v);
                apply(*o.spec, o.value, "--" + std::string(flag) + " " + v);
            }
    };
    each("model-slots", [](ModelSpec& s, const std::string& v, const std::string& what) {
        std::size_t used = 0;
        int n = 0;
        try {
            n = std::stoi(v, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != v.size() || n < 1 || n > 256) throw std::runtime_error(what + ": slots must lie in 1..256");
        s.slots = n;
    });
    each("model-engine-arg", [](ModelSpec& s, const std::string& v, const std::string&) { s.engine_args.push_back(v); });
    each("model-memory", [](ModelSpec& s, const std::string& v, const std::string& what) { s.memory = parse_bytes(v, what); });
    for (auto& s : specs)
        if (s.memory == 0) s.memory = files_size(s.dir);
    return specs;
}

}  // namespace

int main(int argc, char** argv) {
    inkling::protocol::init_binary_stdio();  // SIGPIPE ignored: a vanished peer is an error, not a death
    ServerOptions so;
    EngineSupervisor::Options eo;
    Models::Options mo;
    try {
        cxxopts::Options options("inkling-gateway");
        inkling::cli::add_options(options, program());
        auto args = options.parse(argc, argv);
        if (args.count("help")) {
            std::cout << inkling::cli::help(program()) << "\n";
            return 0;
        }
        inkling::cli::check_applies(args, program(), "");
        if (!args.count("model")) throw std::runtime_error("--model DIR is required");
        so.host = args["host"].as<std::string>();
        so.port = args["port"].as<unsigned short>();
        if (args.count("api-key")) so.api_key = args["api-key"].as<std::string>();
        else if (auto k = inkling::cli::env(program(), "INKLING_API_KEY")) so.api_key = *k;
        if (!is_loopback(so.host) && so.api_key.empty() && !args["allow-insecure-bind"].as<bool>())
            throw std::runtime_error("refusing to listen on " + so.host +
                                     " without an API key (--api-key, or --allow-insecure-bind to accept the risk)");
        if (args.count("allowed-host")) so.allowed_hosts = args["allowed-host"].as<std::vector<std::string>>();
        if (args.count("trusted-proxy")) so.trusted_proxies = args["trusted-proxy"].as<std::vector<std::string>>();
        so.max_connections = args["max-connections"].as<int>();
        so.max_connections_per_ip = args["max-connections-per-address"].as<int>();
        if (so.max_connections < 1 || so.max_connections_per_ip < 1)
            throw std::runtime_error("--max-connections and --max-connections-per-address must be at least 1");
        const std::string port = std::to_string(so.port);
        so.cors_origins = {"http://127.0.0.1:" + port, "http://localhost:" + port};
        if (args.count("cors-origin")) {
            auto extra = args["cors-origin"].as<std::vector<std::string>>();
            so.cors_origins.insert(so.cors_origins.end(), extra.begin(), extra.end());
        }
        so.max_body = args["max-body"].as<std::size_t>();
        so.queue_timeout = std::chrono::seconds(args["queue-timeout"].as<int>());
        if (args["write-deadline"].as<int>() < 1) throw std::runtime_error("--write-deadline must be at least 1");
        so.write_deadline = std::chrono::seconds(args["write-deadline"].as<int>());
        for (const char* f : {"accept-deadline", "frame-deadline"})
            if (args[f].as<int>() < 1) throw std::runtime_error(std::string("--") + f + " must be at least 1");
        so.accept_deadline = std::chrono::seconds(args["accept-deadline"].as<int>());
        so.frame_deadline = std::chrono::seconds(args["frame-deadline"].as<int>());
        if (args["affinity-entries"].as<int>() < 0) throw std::runtime_error("--affinity-entries must be 0 or more");
        so.affinity_entries = static_cast<std::size_t>(args["affinity-entries"].as<int>());
        so.limits.max_tokens_cap = args["max-tokens"].as<std::uint64_t>();
        if (so.limits.max_tokens_cap < 1 || so.limits.max_tokens_cap > inkling::protocol::kDefaultLimits.max_tokens)
            throw std::runtime_error("--max-tokens must lie in 1.." + std::to_string(inkling::protocol::kDefaultLimits.max_tokens) +
                                     " (the protocol's max_tokens range)");
        const std::string boost = args["dmel-boost"].as<std::string>();
        if (boost != "on" && boost != "off") throw std::runtime_error("--dmel-boost must be on or off");
        so.limits.dmel_boost = boost == "on";
        const int slots = args["slots"].as<int>();
        if (slots < 1 || slots > 256) throw std::runtime_error("--slots must lie in 1..256");
        const std::vector<ModelSpec> specs = model_specs(args, slots);
        for (const auto& s : specs) so.limits.model_ids.push_back(s.id);
        const std::string load = args["model-load"].as<std::string>();
        if (load != "start" && load != "on-demand") throw std::runtime_error("--model-load must be start or on-demand");
        mo.on_demand = load == "on-demand";
        if (args["model-idle-timeout"].as<int>() < 0) throw std::runtime_error("--model-idle-timeout must be 0 or more");
        mo.idle_timeout = std::chrono::seconds(args["model-idle-timeout"].as<int>());
        mo.budget = parse_bytes(args["memory-budget"].as<std::string>(), "--memory-budget");
        if (args["model-load-wait"].as<int>() < 1) throw std::runtime_error("--model-load-wait must be at least 1");
        so.engine_wait = std::chrono::seconds(args["model-load-wait"].as<int>());
        if (args["restart-settle"].as<int>() < 0 || args["restart-backoff-max"].as<int>() < 1)
            throw std::runtime_error("--restart-settle must be 0 or more and --restart-backoff-max at least 1");
        eo.settle = std::chrono::seconds(args["restart-settle"].as<int>());
        for (const char* f : {"engine-ping", "engine-deadline", "engine-start-deadline", "engine-drain-deadline"})
            if (args[f].as<int>() < 1) throw std::runtime_error(std::string("--") + f + " must be at least 1");
        eo.ping = std::chrono::seconds(args["engine-ping"].as<int>());
        eo.deadline = std::chrono::seconds(args["engine-deadline"].as<int>());
        eo.start_deadline = std::chrono::seconds(args["engine-start-deadline"].as<int>());
        eo.drain_deadline = std::chrono::seconds(args["engine-drain-deadline"].as<int>());
        eo.backoff_max = std::chrono::seconds(args["restart-backoff-max"].as<int>());
        asio::io_context io;
        Metrics metrics;
        Models models(io, mo);
        std::string names;
        for (const auto& s : specs) {
            EngineSupervisor::Options e = eo;
            e.argv = {args["engine"].as<std::string>(), "serve", "--model", s.dir, "--slots", std::to_string(s.slots),
                      "--ctx", std::to_string(args["ctx"].as<int>()), "--threads", std::to_string(args["threads"].as<int>()),
                      // progress EVENTs while it loads: the start-up deadline resets on each
                      "--load-events"};
            if (args.count("engine-arg"))
                for (const auto& a : args["engine-arg"].as<std::vector<std::string>>()) e.argv.push_back(a);
            e.argv.insert(e.argv.end(), s.engine_args.begin(), s.engine_args.end());
            models.add(std::make_unique<Model>(io, s, e, s.slots, args["max-queue"].as<int>(), so.affinity_entries, metrics));
            names += (names.empty() ? "" : ", ") + s.id;
        }
        Server server(io, so, models, metrics);
        server.listen();  // bind before spawning an engine: a busy port fails at once
        std::fprintf(stderr, "[gateway] listening on http://%s:%u (model%s %s)\n", so.host.c_str(), so.port,
                     specs.size() > 1 ? "s" : "", names.c_str());
        models.start();
        asio::signal_set signals(io, SIGTERM, SIGINT);
        signals.async_wait([&](const boost::system::error_code& ec, int sig) {
            if (ec) return;
            std::fprintf(stderr, "[gateway] signal %d: draining\n", sig);
            server.stop_accepting();
            asio::co_spawn(io, [&]() -> awaitable<void> {
                asio::steady_timer t(io);
                // In-flight requests finish first (bounded), then the engine drains and stops.
                for (int i = 0; i < 1200 && server.active_requests() > 0; ++i) {
                    t.expires_after(std::chrono::milliseconds(100));
                    co_await t.async_wait(use_awaitable);
                }
                co_await models.shutdown();
                io.stop();
            }, asio::detached);
        });
        io.run();
        std::fprintf(stderr, "[gateway] stopped\n");
        return 0;
    } catch (const cxxopts::exceptions::exception& e) {
        std::fprintf(stderr, "inkling-gateway: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "inkling-gateway: %s\n", e.what());
        return 1;
    }
}
