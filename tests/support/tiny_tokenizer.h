// A tiny byte-level BPE tokenizer.json for tests: ids 0..255 are the bytes, then `extra`
// tokens in order from 256, no merges, no added tokens.
//
//   auto tok = model::Tokenizer::parse(test_support::tiny_tokenizer({"ab"}).dump(), "tiny");
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace test_support {

// GPT-2 bytes_to_unicode, for writing byte-level vocab keys.
inline std::string byte_level(std::string_view bytes) {
    std::string out;
    for (unsigned char b : bytes) {
        bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        unsigned cp = b;
        if (!printable) {
            unsigned extra = 0;
            for (unsigned c = 0; c < b; ++c) {
                bool p = (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
                if (!p) ++extra;
            }
            cp = 256 + extra;
        }
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else {
            out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        }
    }
    return out;
}

inline nlohmann::json tiny_tokenizer(const std::vector<std::string>& extra) {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_level(std::string(1, static_cast<char>(b)))] = b;
    int id = 256;
    for (const auto& t : extra) vocab[byte_level(t)] = id++;
    return {
        {"added_tokens", nlohmann::json::array()},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+|\\S+"}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
    };
}

}  // namespace test_support
