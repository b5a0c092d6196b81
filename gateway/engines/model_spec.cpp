#include "gateway/engines/model_spec.h"

#include <set>
#include <stdexcept>

namespace inkling::gateway {

ModelSpec parse_model_value(std::string_view value) {
    ModelSpec spec;
    const auto eq = value.find('=');
    const auto slash = value.find('/');
    if (eq != std::string_view::npos && (slash == std::string_view::npos || eq < slash)) {
        spec.id = std::string(value.substr(0, eq));
        spec.dir = std::string(value.substr(eq + 1));
        if (spec.id.empty()) throw std::runtime_error("--model " + std::string(value) + ": the id before '=' is empty");
    } else {
        spec.dir = std::string(value);
    }
    if (spec.dir.empty()) throw std::runtime_error("--model " + std::string(value) + ": no model directory");
    return spec;
}

ModelOption model_option(std::vector<ModelSpec>& specs, std::string_view flag, std::string_view value) {
    const auto eq = value.find('=');
    if (eq == std::string_view::npos || eq == 0)
        throw std::runtime_error("--" + std::string(flag) + " " + std::string(value) + ": expected ID=VALUE");
    const std::string id(value.substr(0, eq));
    for (auto& s : specs)
        if (s.id == id) return {&s, std::string(value.substr(eq + 1))};
    std::string known;
    for (const auto& s : specs) known += (known.empty() ? "" : ", ") + s.id;
    throw std::runtime_error("--" + std::string(flag) + " " + std::string(value) + ": no --model is named '" + id +
                             "' (the models: " + known + ")");
}

void check_model_ids(const std::vector<ModelSpec>& specs) {
    std::set<std::string> seen;
    for (const auto& s : specs) {
        if (s.id.empty()) throw std::runtime_error("--model " + s.dir + ": the model id is empty");
        for (unsigned char c : s.id)
            if (c <= ' ' || c >= 0x7f || c == '/')
                throw std::runtime_error("model id '" + s.id +
                                         "': only printable ASCII without spaces or '/' (clients send it as `model`)");
        if (!seen.insert(s.id).second)
            throw std::runtime_error("model id '" + s.id + "' is given to two --model directories (name them ID=DIR)");
    }
}

std::uint64_t parse_bytes(std::string_view text, const std::string& what) {
    auto bad = [&] { return std::runtime_error(what + " " + std::string(text) + ": expected bytes, e.g. 8G, 512M or 1048576"); };
    if (text.empty()) throw bad();
    std::uint64_t shift = 0;
    switch (text.back()) {
        case 'K': case 'k': shift = 10; break;
        case 'M': case 'm': shift = 20; break;
        case 'G': case 'g': shift = 30; break;
        case 'T': case 't': shift = 40; break;
        default: break;
    }
    std::string_view digits = shift ? text.substr(0, text.size() - 1) : text;
    if (digits.empty() || digits.size() > 15) throw bad();
    std::uint64_t n = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') throw bad();
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return n << shift;
}

}  // namespace inkling::gateway
