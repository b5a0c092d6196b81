// build/inkling-gateway — the OpenAI-compatible HTTP gateway in front of one engine.
//
//   inkling-gateway --model DIR [--host 127.0.0.1] [--port 8000] [--api-key K] [--slots N] …
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
#include "gateway/engine_supervisor.h"
#include "gateway/metrics.h"
#include "gateway/options.h"
#include "gateway/server.h"
#include "gateway/slot_pool.h"
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

}  // namespace

int main(int argc, char** argv) {
    inkling::protocol::init_binary_stdio();  // SIGPIPE ignored: a vanished peer is an error, not a death
    ServerOptions so;
    EngineSupervisor::Options eo;
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
        fs::path model = args["model"].as<std::string>();
        if (!fs::is_directory(model)) throw std::runtime_error("--model " + model.string() + " is not a directory");
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
        so.limits.model_id = args.count("model-id") ? args["model-id"].as<std::string>() : fs::absolute(model).filename().string();
        so.limits.max_tokens_cap = args["max-tokens"].as<std::uint64_t>();
        if (so.limits.max_tokens_cap < 1 || so.limits.max_tokens_cap > inkling::protocol::kDefaultLimits.max_tokens)
            throw std::runtime_error("--max-tokens must lie in 1.." + std::to_string(inkling::protocol::kDefaultLimits.max_tokens) +
                                     " (the protocol's max_tokens range)");
        const std::string boost = args["dmel-boost"].as<std::string>();
        if (boost != "on" && boost != "off") throw std::runtime_error("--dmel-boost must be on or off");
        so.limits.dmel_boost = boost == "on";
        const int slots = args["slots"].as<int>();
        if (slots < 1 || slots > 256) throw std::runtime_error("--slots must lie in 1..256");
        eo.argv = {args["engine"].as<std::string>(), "serve", "--model", model.string(), "--slots", std::to_string(slots),
                   "--ctx", std::to_string(args["ctx"].as<int>()), "--threads", std::to_string(args["threads"].as<int>()),
                   // progress EVENTs while it loads: the start-up deadline resets on each
                   "--load-events"};
        if (args.count("engine-arg"))
            for (const auto& a : args["engine-arg"].as<std::vector<std::string>>()) eo.argv.push_back(a);
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
        EngineSupervisor engine(io, eo, metrics);
        SlotPool pool(io.get_executor(), slots, args["max-queue"].as<int>());
        Server server(io, so, engine, metrics, pool);
        server.listen();  // bind before spawning the engine: a busy port fails at once
        std::fprintf(stderr, "[gateway] listening on http://%s:%u (model %s)\n", so.host.c_str(), so.port,
                     so.limits.model_id.c_str());
        engine.start();
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
                co_await engine.shutdown();
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
