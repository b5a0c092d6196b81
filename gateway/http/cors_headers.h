// The request headers a CORS preflight allows (Access-Control-Allow-Headers): what the
// official SDKs send from a browser. openai-node and @anthropic-ai/sdk set Authorization or
// x-api-key, their platform and retry headers (X-Stainless-Lang, -Package-Version, -OS,
// -Arch, -Runtime, -Runtime-Version, -Retry-Count, -Timeout, -Helper-Method, …),
// OpenAI-Organization / OpenAI-Project, and anthropic-version, anthropic-beta and
// anthropic-dangerous-direct-browser-access. A browser refuses the whole request when one
// header it would send is not allowed, so besides the fixed list every requested header of
// the SDKs' families (x-stainless-*, anthropic-*, openai-*) is allowed too: a newer SDK's
// new header keeps working.
#pragma once

#include <string>
#include <string_view>

namespace inkling::gateway {

// The Access-Control-Allow-Headers value for a preflight whose
// Access-Control-Request-Headers is `requested` (a comma-separated list, maybe empty): the
// fixed list, then the requested names of the SDK families not in it (lower-cased, once
// each). Other requested names are left out (the browser then refuses, as it should).
std::string preflight_allow_headers(std::string_view requested);

}  // namespace inkling::gateway
