// build/coli — the terminal chat front end.
//
//   coli chat [--attach URL] [--no-attach] [--model DIR] [--effort LEVEL] [--temperature T] …
//   coli run "prompt" [same options]            one answer, then exit
//   coli serve [gateway options]                the gateway in the foreground
//
// chat and run first look for a gateway at --attach (default http://127.0.0.1:8000,
// /health then /v1/models, 1.5 s each); without one they start a private engine on
// --model and speak the wire protocol to it directly. The flags are declared in
// tools/coli/options.cpp (docs/configuration.md).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "protocol/cli/cxxopts.h"

#include "protocol/audio/audio_error.h"
#include "protocol/audio/dmel.h"
#include "protocol/binary_stdio.h"
#include "protocol/cli/cxxopts_bind.h"
#include "protocol/cli/sibling.h"
#include "platform/child_process.h"
#include "platform/process.h"
#include "platform/stop_request.h"
#include "protocol/limits.h"
#include "tools/coli/attached.h"
#include "tools/coli/line_input.h"
#include "tools/coli/options.h"
#include "tools/coli/private_engine.h"

namespace fs = std::filesystem;
namespace tml = inkling::protocol::tml;
using namespace coli;

namespace {

volatile sig_atomic_t g_interrupts = 0;  // Ctrl-C presses since the last prompt
void on_interrupt() { g_interrupts = g_interrupts + 1; }

// The committed demo model (models/inkling-demo, found through the source directory the
// build recorded), used when no --model is given and no gateway answers; "" if absent.
std::string default_model() {
#ifdef INKLING_DEFAULT_MODEL_DIR
    std::error_code ec;
    if (fs::is_regular_file(fs::path(INKLING_DEFAULT_MODEL_DIR) / "config.json", ec)) return INKLING_DEFAULT_MODEL_DIR;
#endif
    return "";
}

struct Style {
    bool tty;
    std::string dim() const { return tty ? "\x1b[2m" : ""; }
    std::string bold() const { return tty ? "\x1b[1m" : ""; }
    std::string reset() const { return tty ? "\x1b[0m" : ""; }
};

std::unique_ptr<Backend> connect(const cxxopts::ParseResult& args, std::string& how) {
    const std::string url_text = args["attach"].as<std::string>();
    const std::string key = args.count("api-key") ? args["api-key"].as<std::string>() : "";
    if (!args["no-attach"].as<bool>()) {
        auto url = parse_url(url_text);
        if (!url) throw std::runtime_error("--attach: '" + url_text + "' is not an http://host:port URL");
        if (auto model = Attached::probe(*url, key, 1500)) {
            how = "attached to " + url_text;
            return std::make_unique<Attached>(*url, key, *model);
        }
        if (args.count("attach") && !args.count("model"))
            throw std::runtime_error("no ready gateway answers at " + url_text);
    }
    const std::string model = args.count("model") ? args["model"].as<std::string>() : default_model();
    if (model.empty())
        throw std::runtime_error("no gateway at " + url_text + " and no --model DIR for a private engine");
    how = args.count("model") ? "private engine" : "private engine on the demo model " + model;
    return std::make_unique<PrivateEngine>(args["engine"].as<std::string>(), model, args["ctx"].as<int>());
}

Clip load_clip(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open");
    Clip c;
    c.name = path;
    c.wav.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    auto enc = inkling::protocol::audio::encode_wav_to_dmel(
        std::span(reinterpret_cast<const std::uint8_t*>(c.wav.data()), c.wav.size()));
    c.dmel = std::move(enc.frames);
    c.frames = enc.n_frames;
    if (c.frames == 0) throw std::runtime_error(path + ": the clip is empty");
    return c;
}

// One turn: stream the answer, then the footer. Returns false when the turn failed.
bool answer(Backend& b, std::vector<tml::Message>& history, std::vector<Clip>& clips, const TurnSettings& ts,
            const Style& st, bool footer) {
    bool in_reasoning = false;
    Output out;
    out.reasoning = [&](const std::string& t) {
        if (!in_reasoning) std::cout << st.dim() << (st.tty ? "" : "[thinking] ");
        in_reasoning = true;
        std::cout << t << std::flush;
    };
    out.content = [&](const std::string& t) {
        if (in_reasoning) std::cout << st.reset() << "\n";
        in_reasoning = false;
        std::cout << t << std::flush;
    };
    g_interrupts = 0;
    TurnResult r = b.turn(history, clips, ts, out, [] { return g_interrupts > 0; });
    if (in_reasoning) std::cout << st.reset();
    std::cout << "\n";
    clips.clear();
    if (!r.error.empty()) {
        std::cout << st.bold() << "error: " << st.reset() << r.error << "\n";
        history.pop_back();  // the turn did not happen
        return false;
    }
    tml::Message reply{tml::Role::Assistant, {}, {}};
    reply.parts.push_back(tml::Part::text_part(r.content));
    history.push_back(std::move(reply));
    if (footer) {
        char line[256];
        const double tps = r.seconds > r.ttft_seconds && r.completion_tokens > 1
                               ? (r.completion_tokens - 1) / (r.seconds - r.ttft_seconds) : 0.0;
        std::snprintf(line, sizeof line, "[%ld tokens, %.1f tok/s, first token %.0f ms", r.completion_tokens, tps,
                      r.ttft_seconds * 1000);
        std::string f = line;
        if (r.cache_hit_pct >= 0) f += ", cache hit " + std::to_string(static_cast<int>(r.cache_hit_pct)) + "%";
        if (r.reused_tokens >= 0) f += ", reused " + std::to_string(r.reused_tokens) + " of " + std::to_string(r.prompt_tokens) + " prompt tokens";
        if (r.stopped) f += ", stopped";
        else if (r.length_limited) f += ", length limit";
        std::cout << st.dim() << f << "]" << st.reset() << "\n";
    }
    return true;
}

const char* kHelp =
    "  :reset        start a new conversation\n"
    "  :audio F.wav  send this clip with the next message\n"
    "  :stats        engine statistics\n"
    "  :help         this help\n"
    "  :q            quit (also Ctrl-D)\n"
    "  Ctrl-C        stop the current answer; twice quits\n";

int chat(Backend& b, const TurnSettings& ts, const Style& st, const std::string& system) {
    std::vector<tml::Message> history;
    auto reset = [&] {
        history.clear();
        if (!system.empty()) history.push_back({tml::Role::System, {tml::Part::text_part(system)}, {}});
    };
    reset();
    std::vector<Clip> clips;
    const bool tty_in = inkling::platform::stdin_is_terminal();
    if (tty_in) start_line_history();
    while (true) {
        std::string line;
        // A second Ctrl-C that came after the answer it stopped, before the prompt.
        if (g_interrupts > 1) break;
        if (tty_in) {
            auto l = read_terminal_line(clips.empty() ? "you> " : "you (+audio)> ");
            if (!l) break;  // Ctrl-D
            line = std::move(*l);
        } else {
            if (!std::getline(std::cin, line)) break;
        }
        if (g_interrupts > 1) break;
        g_interrupts = 0;
        if (line.empty()) continue;
        if (line == ":q" || line == ":quit") break;
        if (line == ":help") {
            std::cout << kHelp;
            continue;
        }
        if (line == ":reset") {
            reset();
            clips.clear();
            std::cout << st.dim() << "[new conversation]" << st.reset() << "\n";
            continue;
        }
        if (line == ":stats") {
            std::cout << b.stats() << "\n";
            continue;
        }
        if (line.starts_with(":audio ")) {
            try {
                clips.push_back(load_clip(line.substr(7)));
                std::cout << st.dim() << "[" << clips.back().frames << " audio frames from " << clips.back().name
                          << " go with your next message]" << st.reset() << "\n";
            } catch (const std::exception& e) {
                std::cout << "error: " << e.what() << "\n";
            }
            continue;
        }
        if (line.starts_with(":")) {
            std::cout << "unknown command " << line << "; :help lists them\n";
            continue;
        }
        tml::Message user{tml::Role::User, {tml::Part::text_part(line)}, {}};
        for (const auto& c : clips) user.parts.push_back(tml::Part::audio(c.frames));
        history.push_back(std::move(user));
        if (!tty_in) std::cout << "assistant: ";
        answer(b, history, clips, ts, st, true);
        if (g_interrupts > 1) break;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    inkling::protocol::init_binary_stdio();
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        cxxopts::Options options("coli");
        // serve hands every argument to the gateway, so only it lets unknown flags through.
        if (argc > 1 && std::string_view(argv[1]) == "serve") options.allow_unrecognised_options();
        inkling::cli::add_options(options, program());
        auto args = options.parse(argc, argv);
        const std::string cmd = args.count("command") ? args["command"].as<std::string>() : "";
        if (args.count("help") || cmd.empty()) {
            std::cout << (inkling::cli::has_command(program(), cmd) ? inkling::cli::help(program(), {cmd})
                                                                     : inkling::cli::help(program()))
                      << "\n";
            return args.count("help") ? 0 : 2;
        }
        if (cmd == "serve") {
            // The gateway in the foreground, with every argument after "serve".
            std::vector<std::string> gw{inkling::cli::sibling_path("inkling-gateway")};
            bool after = false, has_model = false;
            for (int i = 1; i < argc; ++i) {
                if (after) gw.push_back(argv[i]);
                if (after && std::string_view(argv[i]).starts_with("--model")) has_model = true;
                if (std::string(argv[i]) == "serve") after = true;
            }
            if (!has_model && !default_model().empty()) {  // serve the demo model by default
                gw.push_back("--model");
                gw.push_back(default_model());
            }
            inkling::platform::replace_process(gw);
            throw std::runtime_error("cannot start " + gw[0]);
        }
        if (cmd != "chat" && cmd != "run") throw std::runtime_error("unknown command '" + cmd + "' (chat, run, serve)");
        inkling::cli::check_applies(args, program(), cmd);
        TurnSettings ts;
        auto effort = tml::effort_for_level(args["effort"].as<std::string>());
        if (!effort) throw std::runtime_error("--effort: unknown level " + args["effort"].as<std::string>());
        ts.effort = *effort;
        ts.temperature = args["temperature"].as<double>();
        ts.top_p = args["top-p"].as<double>();
        ts.max_tokens = args["max-tokens"].as<int>();
        if (ts.max_tokens < 1 || static_cast<std::uint64_t>(ts.max_tokens) > inkling::protocol::kDefaultLimits.max_tokens)
            throw std::runtime_error("--max-tokens must lie in 1.." +
                                     std::to_string(inkling::protocol::kDefaultLimits.max_tokens) +
                                     " (the protocol's max_tokens range)");
        inkling::platform::on_interrupt(on_interrupt);
        const Style st{inkling::platform::is_terminal(stdout)};
        std::string how;
        auto backend = connect(args, how);
        if (cmd == "run") {
            if (!args.count("prompt")) throw std::runtime_error("coli run \"prompt\": the prompt is missing");
            std::vector<tml::Message> history;
            const std::string system = args.count("system") ? args["system"].as<std::string>() : "";
            if (!system.empty()) history.push_back({tml::Role::System, {tml::Part::text_part(system)}, {}});
            std::vector<Clip> clips;
            if (args.count("audio")) clips.push_back(load_clip(args["audio"].as<std::string>()));
            tml::Message user{tml::Role::User, {tml::Part::text_part(args["prompt"].as<std::string>())}, {}};
            for (const auto& c : clips) user.parts.push_back(tml::Part::audio(c.frames));
            history.push_back(std::move(user));
            return answer(*backend, history, clips, ts, st, st.tty) ? 0 : 1;
        }
        std::cout << st.dim() << "coli: " << backend->describe() << " — :help for commands" << st.reset() << "\n";
        return chat(*backend, ts, st, args.count("system") ? args["system"].as<std::string>() : "");
    } catch (const cxxopts::exceptions::exception& e) {
        std::fprintf(stderr, "coli: %s\n", e.what());
        return 2;
    } catch (const inkling::protocol::audio::AudioError& e) {
        std::fprintf(stderr, "coli: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "coli: %s\n", e.what());
        return 1;
    }
}
