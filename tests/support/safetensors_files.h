// safetensors files for the C++ tests: read one whole, or write one from named tensors (each
// its dtype text, shape and raw bytes), to damage or rewrite a fixture freely.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace test_support {

struct Tensor {
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::string bytes;
};
using Tensors = std::map<std::string, Tensor>;

inline Tensors read_safetensors(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    const std::string file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::uint64_t n;
    std::memcpy(&n, file.data(), 8);
    const auto header = nlohmann::json::parse(file.substr(8, n));
    Tensors out;
    for (const auto& [name, e] : header.items()) {
        if (name == "__metadata__") continue;
        const auto begin = e["data_offsets"][0].get<std::size_t>(), end = e["data_offsets"][1].get<std::size_t>();
        out[name] = {e["dtype"], e["shape"].get<std::vector<std::int64_t>>(), file.substr(8 + n + begin, end - begin)};
    }
    return out;
}

inline void write_safetensors(const std::filesystem::path& p, const Tensors& tensors) {
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (const auto& [name, t] : tensors) {
        header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
        data += t.bytes;
    }
    std::string text = header.dump();
    while (text.size() % 8) text += ' ';
    const std::uint64_t n = text.size();
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text << data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
    return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

}  // namespace test_support
