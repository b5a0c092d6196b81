#include "protocol/text/utf8_release.h"

namespace inkling::protocol::text {
namespace {
// Length of the UTF-8 sequence a lead byte starts, 0 if it cannot start one.
std::size_t sequence_length(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}
bool continuation(unsigned char b) { return (b & 0xC0) == 0x80; }
}  // namespace

std::string take_utf8(std::string& pending, bool final) {
    std::string out;
    std::size_t i = 0;
    while (i < pending.size()) {
        const auto b = static_cast<unsigned char>(pending[i]);
        const std::size_t n = sequence_length(b);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        if (i + n > pending.size()) {
            // Incomplete: wait for more bytes, unless what is there is already invalid.
            bool ok = true;
            for (std::size_t j = i + 1; j < pending.size(); ++j) ok = ok && continuation(static_cast<unsigned char>(pending[j]));
            if (ok && !final) break;
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        bool ok = true;
        for (std::size_t j = 1; j < n; ++j) ok = ok && continuation(static_cast<unsigned char>(pending[i + j]));
        // Overlongs and surrogates: E0 needs A0.., ED at most 9F, F0 needs 90.., F4 at most 8F.
        const auto b1 = n > 1 ? static_cast<unsigned char>(pending[i + 1]) : 0;
        if (ok && ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 > 0x9F) || (b == 0xF0 && b1 < 0x90) ||
                   (b == 0xF4 && b1 > 0x8F)))
            ok = false;
        if (!ok) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        out.append(pending, i, n);
        i += n;
    }
    pending.erase(0, i);
    return out;
}

}  // namespace inkling::protocol::text
