// Arbitrary header lines through the SUBMIT parser: no crash, and any accepted header
// prints back canonically and parses again to the same request.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "protocol/fields.h"
#include "protocol/submit_header.h"

namespace proto = inkling::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string line(reinterpret_cast<const char*>(data), size);
    auto fields = proto::split_fields(line);
    auto h = proto::parse_submit_header(fields, proto::kDefaultLimits);
    if (!h.request) return 0;
    if (h.request->id != h.id || !h.problem.empty()) std::abort();
    proto::Submit s = *h.request;
    s.prompt.assign(static_cast<std::size_t>(*h.prompt_bytes), 'p');
    s.extension.assign(static_cast<std::size_t>(h.extension_bytes), 'x');
    std::string again_line = proto::format_submit_header(s);
    auto again = proto::parse_submit_header(proto::split_fields(again_line), proto::kDefaultLimits);
    if (!again.request) std::abort();
    proto::Submit t = *again.request;
    t.prompt = s.prompt;
    t.extension = s.extension;
    if (!(t == s)) std::abort();
    return 0;
}
