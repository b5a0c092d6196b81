// tokenize-cli: the engine tokenizer behind a pipe, for tests/engine/tokenizer_parity.mjs.
//
//   tokenize-cli TOKENIZER.json [--roundtrip]
//       stdin: one input per line — a JSON string (its UTF-8 bytes), or {"hex":"…"} for
//       arbitrary bytes. stdout: one line per input, the JSON array of ids; with
//       --roundtrip, {"ids":[…],"roundtrip":true|false} (decode(encode(s)) == s).
//   tokenize-cli TOKENIZER.json --bench FILE [--threads N] [--repeat R]
//       encodes FILE R times (default 3) on each of N threads (default 1) at once and
//       prints tokens, bytes and MB/s of the best repeat.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/tokenizer.h"

using inkling::model::Tokenizer;

namespace {

std::string from_hex(const std::string& hex) {
    if (hex.size() % 2 != 0) throw std::runtime_error("odd hex length");
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

int run_lines(const Tokenizer& tok, bool roundtrip) {
    std::string line;
    std::size_t number = 0;
    while (std::getline(std::cin, line)) {
        ++number;
        std::string text;
        try {
            auto v = nlohmann::json::parse(line);
            text = v.is_string() ? v.get<std::string>() : from_hex(v.at("hex").get<std::string>());
        } catch (const std::exception& e) {
            std::cerr << "tokenize-cli: input line " << number << ": " << e.what() << "\n";
            return 2;
        }
        std::vector<std::int32_t> ids = tok.encode(text);
        nlohmann::json out = ids;
        if (roundtrip) out = {{"ids", std::move(out)}, {"roundtrip", tok.decode(ids) == text}};
        std::cout << out.dump() << '\n';
    }
    std::cout.flush();
    return 0;
}

int run_bench(const Tokenizer& tok, const std::string& file, int threads, int repeat) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        std::cerr << "tokenize-cli: cannot open " << file << "\n";
        return 2;
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    double best = 1e30;
    std::size_t tokens = 0;
    for (int r = 0; r < repeat; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        std::vector<std::size_t> counts(static_cast<std::size_t>(threads));
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] { counts[t] = tok.encode(text).size(); });
        }
        for (auto& th : pool) th.join();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, s);
        tokens = counts[0];
        if (!std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == tokens; })) {
            std::cerr << "tokenize-cli: threads disagree on the token count\n";
            return 1;
        }
    }
    double mb = static_cast<double>(text.size()) * threads / 1e6;
    std::printf("bench: %zu bytes -> %zu tokens (%.2f bytes/token), %d thread(s): %.1f MB/s total\n",
                text.size(), tokens, static_cast<double>(text.size()) / static_cast<double>(tokens),
                threads, mb / best);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: tokenize-cli TOKENIZER.json [--roundtrip | --bench FILE [--threads N] [--repeat R]]\n";
        return 2;
    }
    bool roundtrip = false;
    std::string bench;
    int threads = 1, repeat = 3;
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--roundtrip") {
            roundtrip = true;
        } else if (a == "--bench" && i + 1 < argc) {
            bench = argv[++i];
        } else if (a == "--threads" && i + 1 < argc) {
            threads = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--repeat" && i + 1 < argc) {
            repeat = std::max(1, std::atoi(argv[++i]));
        } else {
            std::cerr << "tokenize-cli: unknown argument " << a << "\n";
            return 2;
        }
    }
    try {
        auto t0 = std::chrono::steady_clock::now();
        Tokenizer tok = Tokenizer::load(argv[1]);
        double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!bench.empty()) {
            std::printf("load: %.3f s, vocab size %zu\n", load_s, tok.vocab_size());
            return run_bench(tok, bench, threads, repeat);
        }
        return run_lines(tok, roundtrip);
    } catch (const std::exception& e) {
        std::cerr << "tokenize-cli: " << e.what() << "\n";
        return 1;
    }
}
