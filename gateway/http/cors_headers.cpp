#include "gateway/http/cors_headers.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace inkling::gateway {

namespace {

// Every name the two SDKs (tests/gateway/node_modules: openai 6.x, @anthropic-ai/sdk) may set
// on a request to the endpoints this gateway serves, and User-Agent (which a browser lets a
// page set, and then preflights). Accept and Content-Type of application/json: Content-Type
// is not CORS-safelisted for JSON, so it is listed.
constexpr std::array<std::string_view, 20> kFixed{
    "Authorization", "Content-Type", "Accept", "User-Agent", "x-api-key",
    "anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access",
    "OpenAI-Organization", "OpenAI-Project",
    "X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS", "X-Stainless-Arch",
    "X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Retry-Count", "X-Stainless-Timeout",
    "X-Stainless-Helper-Method", "x-stainless-helper"};
constexpr std::array<std::string_view, 3> kFamilies{"x-stainless-", "anthropic-", "openai-"};

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// An RFC 9110 token: what a header name may be (anything else is not echoed back).
bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
}

}  // namespace

std::string preflight_allow_headers(std::string_view requested) {
    std::vector<std::string> known;
    std::string out;
    for (auto name : kFixed) {
        known.push_back(lower(name));
        out += (out.empty() ? "" : ", ") + std::string(name);
    }
    while (!requested.empty()) {
        const auto comma = requested.find(',');
        std::string_view item = requested.substr(0, comma);
        requested = comma == std::string_view::npos ? std::string_view() : requested.substr(comma + 1);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        if (!is_token(item)) continue;
        const std::string name = lower(item);
        const bool family = std::any_of(kFamilies.begin(), kFamilies.end(),
                                        [&](std::string_view f) { return name.size() > f.size() && name.starts_with(f); });
        if (!family || std::find(known.begin(), known.end(), name) != known.end()) continue;
        known.push_back(name);
        out += ", " + name;
    }
    return out;
}

}  // namespace inkling::gateway
