// The preflight's Access-Control-Allow-Headers: the SDKs' fixed names always, requested names
// of their families (x-stainless-*, anthropic-*, openai-*) echoed once, nothing else.
#include <doctest/doctest.h>

#include <cctype>
#include <set>
#include <sstream>
#include <string>

#include "gateway/http/cors_headers.h"

using inkling::gateway::preflight_allow_headers;

namespace {

std::set<std::string> names(const std::string& list) {
    std::set<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
        while (!item.empty() && item.front() == ' ') item.erase(0, 1);
        for (char& c : item) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        CHECK_MESSAGE(out.insert(item).second, "listed twice: ", item);
    }
    return out;
}

}  // namespace

TEST_CASE("cors: the SDKs' headers are allowed without being asked for") {
    const auto allowed = names(preflight_allow_headers(""));
    for (const char* h : {"authorization", "content-type", "x-api-key", "anthropic-version", "anthropic-beta",
                          "anthropic-dangerous-direct-browser-access", "openai-organization", "openai-project",
                          "x-stainless-lang", "x-stainless-package-version", "x-stainless-os", "x-stainless-arch",
                          "x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-retry-count",
                          "x-stainless-timeout", "x-stainless-helper-method", "x-stainless-helper", "user-agent"})
        CHECK_MESSAGE(allowed.count(h) == 1, h);
}

TEST_CASE("cors: requested names of the SDK families are echoed once; others are not") {
    const std::string v = preflight_allow_headers(
        " X-Stainless-Poll-Helper,anthropic-workspace-id , x-stainless-lang,OpenAI-Beta,\tx-custom, x-stainless-,"
        " anthropic-workspace-id, bad header, x-stainless-a\"b");
    const auto allowed = names(v);
    CHECK(allowed.count("x-stainless-poll-helper") == 1);
    CHECK(allowed.count("anthropic-workspace-id") == 1);
    CHECK(allowed.count("openai-beta") == 1);
    CHECK(allowed.count("x-custom") == 0);
    CHECK(allowed.count("x-stainless-") == 0);  // a family prefix alone is no name
    CHECK(allowed.count("bad header") == 0);
    CHECK(v.find('"') == std::string::npos);    // a requested value is never echoed unchecked
    CHECK(allowed.size() == names(preflight_allow_headers("")).size() + 3);
}
