// build/inkling — the engine's command line.
//
//   inkling run  --model DIR (--prompt TEXT | --ids 7,42,199) [-n N] [--chat] [--audio F.dmel] …
//   inkling info --model DIR
//   inkling convert SRC DST [--experts int4|int8] [--dense keep|int8|int4g64] [--keep-audio]
//
// Every flag is declared once in engine/options.cpp (docs/configuration.md is made from
// it). Errors go to stderr with a non-zero exit; nothing is printed half-way as if it worked.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/cli/cxxopts.h"
#include <nlohmann/json.hpp>

#include "engine/bench/device_bench.h"
#include "engine/bench/kernel_bench.h"
#include "engine/bench/model_bench.h"
#include "engine/bench/sampling_bench.h"
#include "engine/convert/convert.h"
#include "engine/convert/report.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/int_kernels.h"
#include "engine/eval/perplexity.h"
#include "engine/experts/expert_cache.h"
#include "engine/forward/forward.h"
#include "engine/model/tokenizer.h"
#include "engine/model/weights.h"
#include "engine/options.h"
#include "engine/sampling/sampler.h"
#include "engine/serve/load_progress.h"
#include "engine/serve/scheduler.h"
#include "engine/serve/serve_loop.h"
#include "engine/vulkan/frame.h"
#include "engine/vulkan/setup.h"
#include "protocol/binary_stdio.h"
#include "protocol/cli/cxxopts_bind.h"
#include "protocol/cli/env.h"
#include "protocol/fields.h"
#include "protocol/tml_render.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace tml = inkling::protocol::tml;
namespace cli = inkling::cli;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::int32_t> parse_ids(const std::string& text) {
    std::vector<std::int32_t> ids;
    std::string token;
    std::stringstream ss(text);
    while (std::getline(ss, token, ',')) {
        auto v = inkling::protocol::parse_u64(token);
        if (!v || *v > INT32_MAX) throw std::runtime_error("--ids: '" + token + "' is not a token id");
        ids.push_back(static_cast<std::int32_t>(*v));
    }
    if (ids.empty()) throw std::runtime_error("--ids: no ids given");
    return ids;
}

std::vector<std::uint8_t> read_dmel(const std::string& path, int mel_bins) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open");
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty() || bytes.size() % static_cast<std::size_t>(mel_bins) != 0)
        throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                                 std::to_string(mel_bins) + "-byte DMel frames");
    return bytes;
}

std::optional<inkling::model::Tokenizer> load_tokenizer(const inkling::model::Model& m) {
    auto path = m.dir / "tokenizer.json";
    if (!std::filesystem::exists(path)) return std::nullopt;
    return inkling::model::Tokenizer::load(path);
}

// Process-wide settings, before any model loads: the kernel ISA and numerics and the Vulkan
// fault hook (--fault-vk-submit, else INKLING_VK_FAULT), which the device code only counts against.
void apply_common(const cxxopts::ParseResult& args, const std::string& cmd) {
    if (args.count("isa")) inkling::cpu::set_isa(inkling::cpu::parse_isa(args["isa"].as<std::string>()));
    if (args.count("numerics"))
        inkling::cpu::set_numerics(inkling::cpu::parse_numerics(args["numerics"].as<std::string>()));
    if (args.count("lane-order")) {
        const std::string mode = args["lane-order"].as<std::string>();
        if (mode != "auto" && mode != "off")
            throw std::runtime_error("--lane-order: expected auto or off, not \"" + mode + "\"");
        inkling::cpu::set_lane_order(mode == "auto");
    }
    if (args.count("fault-vk-submit")) {
        inkling::vulkan::Frame::set_fault_at(args["fault-vk-submit"].as<std::uint64_t>());
    } else if (auto v = cli::env(inkling::engine::program(), "INKLING_VK_FAULT", cmd)) {
        auto n = inkling::protocol::parse_u64(*v);
        if (!n) throw std::runtime_error("INKLING_VK_FAULT: '" + *v + "' is not a submit count");
        inkling::vulkan::Frame::set_fault_at(*n);
    }
}

// The expert cache of a converted model under --cap/--ram-gb/--pin-experts/--usage-file (null for
// a mapped one). It saves the usage history when the last owner lets go.
std::shared_ptr<inkling::experts::ExpertCache> cache_for(const inkling::model::Model& model,
                                                         const cxxopts::ParseResult& args) {
    inkling::experts::CacheFlags f;
    if (args.count("cap")) f.cap = args["cap"].as<int>();
    if (args.count("ram-gb")) f.ram_gb = args["ram-gb"].as<double>();
    if (args.count("pin-experts")) f.pins = args["pin-experts"].as<int>();
    if (args.count("usage-file")) f.usage_file = args["usage-file"].as<std::string>();
    f.warm = args["warm-experts"].as<std::string>();
    return inkling::experts::make_cache(model, f);
}

// The Vulkan chain under --vulkan/--vk-device/--vk-layers/--vk-budget-mb/--vk-experts, handed to `fw`.
void attach_device(inkling::forward::Forward& fw, const inkling::model::Model& model,
                   const cxxopts::ParseResult& args,
                   std::function<void(std::uint64_t, std::uint64_t)> on_layer = {}) {
    inkling::vulkan::VulkanFlags f;
    f.on_layer = std::move(on_layer);
    f.mode = args["vulkan"].as<std::string>();
    if (args.count("vk-device")) f.device = args["vk-device"].as<int>();
    if (args.count("vk-layers")) f.layers = args["vk-layers"].as<int>();
    if (args.count("vk-budget-mb")) f.budget_mb = args["vk-budget-mb"].as<std::uint64_t>();
    f.experts = args["vk-experts"].as<std::string>();
    if (args.count("vk-profile")) f.profile = args["vk-profile"].as<bool>();
    if (args.count("vk-gemm-rows"))
        f.gemm_rows = static_cast<std::uint32_t>(std::min<std::uint64_t>(args["vk-gemm-rows"].as<std::uint64_t>(), 1u << 30));
    if (args.count("vk-stream-rows"))
        f.stream_rows = static_cast<std::uint32_t>(std::min<std::uint64_t>(args["vk-stream-rows"].as<std::uint64_t>(), 1u << 30));
    if (args.count("vk-stream-slots"))
        f.stream_slots = static_cast<int>(std::min<std::uint64_t>(args["vk-stream-slots"].as<std::uint64_t>(), 4096));
    if (args.count("vk-submit-dispatches"))
        f.submit_dispatches = static_cast<std::uint32_t>(
            std::min<std::uint64_t>(args["vk-submit-dispatches"].as<std::uint64_t>(), inkling::vulkan::Frame::max_dispatches));
    if (const auto* cache = fw.expert_cache()) f.history = &cache->history();  // the tier starts from the usage file
    fw.set_chain(inkling::vulkan::open_chain(model, f), f.mode == "prompts");
}

// The model --model names, its safetensors held as --load-weights says.
inkling::model::Model load_model_as_flags_say(const cxxopts::ParseResult& args) {
    return inkling::model::load_model(args["model"].as<std::string>(),
                                      inkling::model::parse_weights_memory(args["load-weights"].as<std::string>()),
                                      inkling::cpu::lane_order_active());
}

int cmd_info(const cxxopts::ParseResult& args) {
    // Mapped: info reads the header and a few tensors, not every byte.
    auto m = inkling::model::load_model(args["model"].as<std::string>(), inkling::model::WeightsMemory::Map);
    const auto& c = m.config;
    nlohmann::json j;
    j["layout"] = m.weights.layout;
    j["hidden"] = c.hidden;
    j["layers"] = c.layers;
    j["vocab"] = c.vocab;
    j["unpadded_vocab"] = c.unpadded_vocab;
    j["global_attention"] = {{"heads", c.heads}, {"kv_heads", c.kv_heads}, {"head_dim", c.head_dim},
                             {"rel_extent", c.rel_extent}};
    j["local_attention"] = {{"heads", c.swa_heads}, {"kv_heads", c.swa_kv_heads}, {"head_dim", c.swa_head_dim},
                            {"window", c.window}};
    j["d_rel"] = c.d_rel;
    j["tau"] = {{"n_floor", c.log_floor}, {"alpha", c.log_alpha}};
    j["conv_kernel"] = c.conv_kernel;
    j["moe"] = {{"experts", c.experts}, {"top_k", c.top_k}, {"shared", c.shared_experts},
                {"expert_width", c.moe_inter}, {"route_scale", c.route_scale}};
    j["dense_width"] = c.dense_inter;
    j["mup"] = c.mup;
    j["eos"] = c.eos;
    std::string kinds;
    for (const auto& k : c.kinds) kinds += std::string(k.local ? "L" : "G") + (k.sparse ? "m" : "d") + " ";
    j["layer_kinds"] = kinds.substr(0, kinds.size() - 1);
    j["audio_tower"] = m.weights.audio_encoder.has_value();
    j["tokenizer"] = std::filesystem::exists(m.dir / "tokenizer.json");
    j["matrix_bytes"] = m.weights.matrix_bytes;
    j["file_bytes"] = m.tensors.total_bytes();
    j["isa"] = inkling::cpu::isa_name(inkling::cpu::active_isa());
    const auto kernels = inkling::cpu::active_kernels();
    j["kernels"] = {{"bf16", kernels.bf16}, {"int8", kernels.int8}, {"int4", kernels.int4}};
    j["numerics"] = inkling::cpu::numerics_name(inkling::cpu::active_numerics());
    std::cout << j.dump(2) << "\n";
    return 0;
}

int cmd_run(const cxxopts::ParseResult& args) {
    const auto t_load = Clock::now();
    auto model = load_model_as_flags_say(args);
    auto tokenizer = load_tokenizer(model);
    const auto& c = model.config;
    const double load_s = seconds_since(t_load);

    std::vector<std::uint8_t> dmel;
    if (args.count("audio")) dmel = read_dmel(args["audio"].as<std::string>(), c.mel_bins);
    const bool chat = args["chat"].as<bool>() || !dmel.empty();
    std::vector<std::int32_t> prompt;
    if (args.count("ids")) {  // taken as given: chat framing and placeholders are the caller's
        prompt = parse_ids(args["ids"].as<std::string>());
    } else if (args.count("prompt")) {
        if (!tokenizer)
            throw std::runtime_error(model.dir.string() + " has no tokenizer.json: give token ids with --ids");
        std::string text = args["prompt"].as<std::string>();
        if (chat) {
            tml::Message user{tml::Role::User, {}, {}};
            if (!text.empty()) user.parts.push_back(tml::Part::text_part(text));
            if (!dmel.empty()) user.parts.push_back(tml::Part::audio(dmel.size() / c.mel_bins));
            auto effort = tml::effort_for_level(args["effort"].as<std::string>());
            if (!effort) throw std::runtime_error("--effort: unknown level " + args["effort"].as<std::string>());
            text = tml::render({user}, {.effort = *effort});
        }
        prompt = tokenizer->encode(text);
    } else {
        throw std::runtime_error("give --prompt TEXT or --ids 1,2,3");
    }
    if (prompt.empty()) throw std::runtime_error("the prompt is empty");
    std::int64_t placeholders = 0;
    for (auto id : prompt) placeholders += id == c.audio_token;
    if (!dmel.empty() && placeholders != static_cast<std::int64_t>(dmel.size() / c.mel_bins))
        throw std::runtime_error("audio frames (" + std::to_string(dmel.size() / c.mel_bins) +
                                 ") do not match the prompt's audio placeholders (" + std::to_string(placeholders) + ")");

    const int n_gen = args["n"].as<int>();
    const bool json = args["json"].as<bool>();
    const std::int64_t ctx = args.count("ctx") ? args["ctx"].as<std::int64_t>()
                                               : static_cast<std::int64_t>(prompt.size()) + n_gen + 1;
    if (static_cast<std::int64_t>(prompt.size()) + n_gen > ctx)
        throw std::runtime_error("prompt (" + std::to_string(prompt.size()) + ") + -n (" + std::to_string(n_gen) +
                                 ") exceed --ctx " + std::to_string(ctx));
    inkling::cpu::ThreadPool pool(args["threads"].as<unsigned>());
    inkling::forward::Forward fw(model, pool, cache_for(model, args));
    attach_device(fw, model, args);
    auto state = inkling::forward::make_session(c, ctx);
    inkling::forward::AudioCursor audio{dmel, 0};

    // Prefill; with --json every position's logits are read (in chunks) for the argmax.
    const auto t_prefill = Clock::now();
    std::vector<std::int32_t> prompt_argmax;
    std::vector<float> last;
    const std::int64_t U = c.unpadded_vocab, P = static_cast<std::int64_t>(prompt.size());
    const std::int64_t chunk = json ? 64 : P;
    for (std::int64_t at = 0; at < P; at += chunk) {
        std::int64_t n = std::min(chunk, P - at);
        auto logits = fw.step(state, std::span(prompt).subspan(at, n), dmel.empty() ? nullptr : &audio, json);
        std::int64_t rows = static_cast<std::int64_t>(logits.size()) / U;
        for (std::int64_t r = 0; r < rows && json; ++r)
            prompt_argmax.push_back(inkling::sampling::argmax(std::span(logits).subspan(r * U, U)));
        last.assign(logits.end() - U, logits.end());
    }
    const double prefill_s = seconds_since(t_prefill);

    inkling::sampling::Params sp;
    sp.temperature = args["temperature"].as<double>();
    sp.top_p = args["top-p"].as<double>();
    sp.top_k = args["top-k"].as<unsigned>();
    sp.repetition_penalty = args["repetition-penalty"].as<double>();
    sp.seed = args["seed"].as<std::uint64_t>();
    inkling::sampling::Sampler sampler(sp);
    std::vector<std::int32_t> history = prompt, tokens;
    std::string text;
    const auto t_decode = Clock::now();
    std::vector<float> logits = last;
    for (int i = 0; i < n_gen; ++i) {
        std::int32_t tok = sampler.next(logits, history);
        tokens.push_back(tok);
        history.push_back(tok);
        if (tokenizer) {
            std::string piece = tokenizer->token_bytes(tok);
            text += piece;
            if (!json) std::fwrite(piece.data(), 1, piece.size(), stdout), std::fflush(stdout);
        } else if (!json) {
            std::printf("%d ", tok);
            std::fflush(stdout);
        }
        if (tok == c.eos || i + 1 == n_gen) break;
        const std::int32_t feed[1] = {tok};
        logits = fw.step(state, feed, nullptr, false);
    }
    const double decode_s = seconds_since(t_decode);
    if (!json) {
        std::printf("\n");
        std::fprintf(stderr, "[run] prompt %lld tokens in %.3f s (%.1f tok/s), %zu generated in %.3f s (%.1f tok/s)\n",
                     static_cast<long long>(P), prefill_s, P / std::max(prefill_s, 1e-9), tokens.size(), decode_s,
                     tokens.size() / std::max(decode_s, 1e-9));
        return 0;
    }
    nlohmann::json j;
    j["prompt_ids"] = prompt;
    j["tokens"] = tokens;
    j["text"] = tokenizer ? nlohmann::json(text) : nlohmann::json(nullptr);
    j["prompt_argmax"] = prompt_argmax;
    j["last_logits"] = last;
    j["timings"] = {{"load_s", load_s},
                    {"prefill_s", prefill_s},
                    {"decode_s", decode_s},
                    {"prefill_tok_s", P / std::max(prefill_s, 1e-9)},
                    {"decode_tok_s", tokens.size() / std::max(decode_s, 1e-9)}};
    j["isa"] = inkling::cpu::isa_name(inkling::cpu::active_isa());
    const auto kernels = inkling::cpu::active_kernels();
    j["kernels"] = {{"bf16", kernels.bf16}, {"int8", kernels.int8}, {"int4", kernels.int4}};
    j["numerics"] = inkling::cpu::numerics_name(inkling::cpu::active_numerics());
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
}

// Perplexity of a text (or ids) under the model, teacher-forced, in windows.
int cmd_eval(const cxxopts::ParseResult& args) {
    auto model = load_model_as_flags_say(args);
    std::vector<std::int32_t> ids;
    if (args.count("ids")) {
        ids = parse_ids(args["ids"].as<std::string>());
    } else if (args.count("text")) {
        auto tokenizer = load_tokenizer(model);
        if (!tokenizer) throw std::runtime_error(model.dir.string() + " has no tokenizer.json: give --ids");
        std::ifstream in(args["text"].as<std::string>(), std::ios::binary);
        if (!in) throw std::runtime_error(args["text"].as<std::string>() + ": cannot open");
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ids = tokenizer->encode(text);
    } else {
        throw std::runtime_error("give --text FILE or --ids 1,2,3");
    }
    const std::int64_t window = args.count("ctx") ? args["ctx"].as<std::int64_t>() : 1024;
    inkling::cpu::ThreadPool pool(args["threads"].as<unsigned>());
    inkling::forward::Forward fw(model, pool, cache_for(model, args));
    attach_device(fw, model, args);
    const auto t0 = Clock::now();
    auto s = inkling::eval::score(fw, ids, window);
    const double secs = seconds_since(t0);
    nlohmann::json j = {{"model", model.dir.string()},
                        {"tokens", ids.size()},
                        {"tokens_scored", s.tokens},
                        {"window", window},
                        {"nll", s.nll},
                        {"mean_nll", s.mean_nll()},
                        {"perplexity", s.perplexity()},
                        {"tokens_per_second", static_cast<double>(ids.size()) / std::max(secs, 1e-9)}};
    std::cout << j.dump(2) << "\n";
    return 0;
}

// --turn-tokens: the ids that open a message (a turn boundary precedes each). By default
// the TMLv0 role markers the tokenizer has; a model without tokenizer.json has none.
std::vector<std::int32_t> turn_tokens(const cxxopts::ParseResult& args, const inkling::model::Tokenizer* tokenizer,
                                      const inkling::model::Config& config) {
    std::vector<std::int32_t> ids;
    if (!args.count("turn-tokens")) {
        if (!tokenizer) return ids;
        for (std::string_view m : {tml::marker::kMessageUser, tml::marker::kMessageModel,
                                   tml::marker::kMessageSystem, tml::marker::kMessageTool})
            if (auto id = tokenizer->find(m)) ids.push_back(*id);
        return ids;
    }
    const std::string list = args["turn-tokens"].as<std::string>();
    if (list == "none") return ids;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
        auto v = inkling::protocol::parse_u64(item);
        if (!v || *v >= static_cast<std::uint64_t>(config.unpadded_vocab))
            throw std::runtime_error("--turn-tokens: '" + item + "' is not a token id of this model (0.." +
                                     std::to_string(config.unpadded_vocab - 1) + "), nor is the list 'none'");
        ids.push_back(static_cast<std::int32_t>(*v));
    }
    if (ids.empty()) throw std::runtime_error("--turn-tokens: the list is empty (give ids, or none)");
    return ids;
}

// The long-lived engine the gateway and coli drive over protocol/ (PROTOCOL.md).
int cmd_serve(const cxxopts::ParseResult& args) {
    inkling::protocol::init_binary_stdio();  // before any byte on stdout
    inkling::serve::LoadProgress progress(args["load-events"].as<bool>(), STDOUT_FILENO);
    progress.report("model");
    auto model = load_model_as_flags_say(args);
    progress.report("tokenizer");
    auto tokenizer = load_tokenizer(model);
    inkling::serve::ServeOptions o;
    o.slots = args["slots"].as<int>();
    o.context = args.count("ctx") ? args["ctx"].as<std::int64_t>() : 4096;
    o.prefill_chunk = args["prefill-chunk"].as<std::int64_t>();
    o.pins = args["snapshot-pins"].as<std::size_t>();
    // A snapshot of a large model is large (Inkling-Small's 35 rings of 512 rows: ~145 MiB):
    // by default the pool holds at least 4 a slot (a regenerate, an edit, two branch points).
    o.snapshot_bytes = args.count("snapshot-mb")
                           ? args["snapshot-mb"].as<std::size_t>() << 20
                           : std::max<std::size_t>(std::size_t{256} << 20,
                                                   4 * static_cast<std::size_t>(o.slots) *
                                                       inkling::serve::PinPool::state_bytes(model.config, o.context));
    o.turn_tokens = turn_tokens(args, tokenizer ? &*tokenizer : nullptr, model.config);
    if (args.count("fault-kill-once-file")) o.fault_kill_once_file = args["fault-kill-once-file"].as<std::string>();
    o.fault_device_lost_after = args["fault-device-lost-after"].as<int>();
    o.fault_hold_after = args["fault-hold-after"].as<std::int64_t>();
    if (o.fault_hold_after < 0) throw std::runtime_error("--fault-hold-after must be 0 (off) or a token count");
    if (o.slots < 1 || o.slots > 256) throw std::runtime_error("--slots must lie in 1..256");
    if (o.context < 2) throw std::runtime_error("--ctx must be at least 2");
    if (o.prefill_chunk < 1) throw std::runtime_error("--prefill-chunk must be at least 1");
    inkling::cpu::ThreadPool pool(args["threads"].as<unsigned>());
    progress.report("experts");
    inkling::serve::Scheduler scheduler(model, tokenizer ? &*tokenizer : nullptr, pool, o, cache_for(model, args));
    progress.report("device");
    attach_device(scheduler.forward(), model, args,
                  [&](std::uint64_t done, std::uint64_t total) { progress.report("device", done, total); });
    return inkling::serve::serve_stdio(scheduler);
}

// `inkling bench`: the kernels alone on synthetic weights (--kernels, --sampling,
// --device-kernels: no model), or prefill and decode speed on one model (engine/bench/).
int cmd_bench(const cxxopts::ParseResult& args) {
    if (args["kernels"].as<bool>()) {
        inkling::cpu::ThreadPool pool(args["threads"].as<unsigned>());
        const auto mb = args["kernel-mb"].as<std::size_t>();
        const auto shape = inkling::bench::parse_kernel_shape(args["kernel-shape"].as<std::string>());
        std::cout << inkling::bench::bench_kernels(pool, mb << 20, shape).dump(2) << "\n";
        return 0;
    }
    if (args["sampling"].as<bool>()) {
        std::cout << inkling::bench::bench_sampling().dump(2) << "\n";
        return 0;
    }
    if (args["device-kernels"].as<bool>()) {
        const int dev = args.count("vk-device") ? args["vk-device"].as<int>() : -1;
        std::cout << inkling::bench::bench_device_kernels(dev, args["kernel-mb"].as<std::size_t>()).dump(2) << "\n";
        return 0;
    }
    if (!args.count("model")) throw std::runtime_error("--model DIR is required");
    auto model = load_model_as_flags_say(args);
    inkling::cpu::ThreadPool pool(args["threads"].as<unsigned>());
    inkling::forward::Forward fw(model, pool, cache_for(model, args));
    attach_device(fw, model, args);
    inkling::bench::ModelBenchOptions o;
    o.prompt_tokens = args["prompt-tokens"].as<int>();
    o.decode_tokens = args["decode-tokens"].as<int>();
    if (args.count("sessions")) o.sessions = inkling::bench::parse_session_counts(args["sessions"].as<std::string>());
    o.reuse_tokens = args["reuse-tokens"].as<int>();
    inkling::bench::bench_model(model, pool, fw, o,
                                [&](inkling::forward::Forward& sf) { attach_device(sf, model, args); }, std::cout);
    return 0;
}

// A checkpoint → a directory with int4/int8 experts (docs/convert.md). Its own flags:
// positional SRC DST, nothing shared with the model commands.
int cmd_convert(int argc, char** argv) {
    cxxopts::Options options("inkling convert");
    cli::add_options(options, inkling::engine::program(), {"convert"});
    auto args = options.parse(argc, argv);
    cli::check_applies(args, inkling::engine::program(), "convert");
    const auto paths = args.count("paths") ? args["paths"].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (args.count("help") || paths.size() != 2) {
        std::cout << cli::help(inkling::engine::program(), {"convert"}) << "\n";
        return args.count("help") ? 0 : 2;
    }
    inkling::convert::Options o;
    o.src = paths[0];
    o.dst = paths[1];
    o.experts = inkling::experts::parse_format(args["experts"].as<std::string>());
    o.dense = inkling::convert::parse_dense_mode(args["dense"].as<std::string>());
    o.keep_audio = args["keep-audio"].as<bool>();
    o.restart = args["restart"].as<bool>();
    o.threads = args["threads"].as<unsigned>();
    o.fault_stop_after_records = args["fault-stop-after-records"].as<std::int64_t>();
    const auto report = inkling::convert::convert(o);
    std::cout << inkling::convert::summary(report) << std::flush;
    return 0;
}

}  // namespace

// The commands parsed here; convert parses its own (positional SRC DST).
const std::initializer_list<std::string_view> kModelCommands = {"run", "serve", "eval", "info", "bench"};

int main(int argc, char** argv) {
    const cli::Program& program = inkling::engine::program();
    try {
        if (argc >= 2 && std::string(argv[1]) == "convert") return cmd_convert(argc - 1, argv + 1);
        cxxopts::Options options("inkling");
        cli::add_options(options, program, kModelCommands);
        auto args = options.parse(argc, argv);
        const std::string cmd = args.count("command") ? args["command"].as<std::string>() : "";
        const bool known = cli::has_command(program, cmd) && cmd != "convert";
        if (args.count("help") || cmd.empty()) {
            std::cout << (known ? cli::help(program, {cmd}) : cli::help(program, kModelCommands)) << "\n";
            return args.count("help") ? 0 : 2;
        }
        if (cmd == "convert") throw std::runtime_error("convert comes first: inkling convert SRC DST [options]");
        if (!known) throw std::runtime_error("unknown command '" + cmd + "' (run, serve, eval, info, bench)");
        cli::check_applies(args, program, cmd);
        apply_common(args, cmd);
        if (cmd == "bench") return cmd_bench(args);
        if (!args.count("model")) throw std::runtime_error("--model DIR is required");
        if (cmd == "run") return cmd_run(args);
        if (cmd == "info") return cmd_info(args);
        if (cmd == "serve") return cmd_serve(args);
        return cmd_eval(args);
    } catch (const cxxopts::exceptions::exception& e) {
        std::fprintf(stderr, "inkling: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "inkling: %s\n", e.what());
        return 1;
    }
}
