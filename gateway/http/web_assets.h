// The web UI's files (gateway/web/*), embedded in the binary at build time by
// gateway/embed_assets.cmake, so the gateway serves them with no files beside it.
#pragma once

#include <span>
#include <string_view>

namespace inkling::gateway {

struct WebAsset {
    const char* path;          // "/index.html", "/app.js", …
    const char* content_type;
    std::string_view data;
};

std::span<const WebAsset> web_assets();

}  // namespace inkling::gateway
