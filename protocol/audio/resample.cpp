#include "protocol/audio/resample.h"

#include <samplerate.h>

#include <algorithm>
#include <climits>

namespace inkling::protocol::audio {
namespace {

// Spare output capacity beyond the target length. The converter never writes more than
// it is given; samples past the target are trimmed anyway. tools/reference/dmel_ref.py
// uses the same margin.
constexpr std::uint64_t kOutputMargin = 64;

static_assert(static_cast<int>(ResampleQuality::SincBest) == SRC_SINC_BEST_QUALITY);
static_assert(static_cast<int>(ResampleQuality::SincMedium) == SRC_SINC_MEDIUM_QUALITY);
static_assert(static_cast<int>(ResampleQuality::SincFastest) == SRC_SINC_FASTEST);
static_assert(static_cast<int>(ResampleQuality::ZeroOrderHold) == SRC_ZERO_ORDER_HOLD);
static_assert(static_cast<int>(ResampleQuality::Linear) == SRC_LINEAR);

}  // namespace

std::string_view to_string(ResampleQuality quality) {
    switch (quality) {
        case ResampleQuality::SincBest: return "best";
        case ResampleQuality::SincMedium: return "medium";
        case ResampleQuality::SincFastest: return "fastest";
        case ResampleQuality::ZeroOrderHold: return "zoh";
        case ResampleQuality::Linear: return "linear";
    }
    return "?";
}

std::optional<ResampleQuality> resample_quality_from_string(std::string_view name) {
    for (auto q : {ResampleQuality::SincBest, ResampleQuality::SincMedium, ResampleQuality::SincFastest,
                   ResampleQuality::ZeroOrderHold, ResampleQuality::Linear})
        if (to_string(q) == name) return q;
    return std::nullopt;
}

std::uint64_t resampled_length(std::uint64_t n, std::uint32_t rate) {
    // n < 2^64 / 16000 for every n a process can hold, so the product cannot overflow.
    return (n * kTargetRate + rate - 1) / rate;
}

std::vector<float> resample_to_16k(std::span<const float> mono, std::uint32_t rate, ResampleQuality quality,
                                   std::vector<std::string>* notes, std::uint64_t max_output) {
    if (rate != kTargetRate && (rate < kMinInputRate || rate > kMaxInputRate))
        throw AudioError("sample rate " + std::to_string(rate) + " Hz cannot be resampled to 16000 Hz (" +
                         "libsamplerate takes " + std::to_string(kMinInputRate) + ".." +
                         std::to_string(kMaxInputRate) + " Hz)");
    const std::uint64_t target = rate == kTargetRate ? mono.size() : resampled_length(mono.size(), rate);
    if (target > max_output)
        throw AudioError("resampling " + std::to_string(mono.size()) + " samples at " + std::to_string(rate) +
                         " Hz gives " + std::to_string(target) + " samples at 16000 Hz, over the limit of " +
                         std::to_string(max_output));
    if (rate == kTargetRate) return {mono.begin(), mono.end()};
    if (mono.empty()) return {};
    if (mono.size() > static_cast<std::uint64_t>(LONG_MAX) || target + kOutputMargin > static_cast<std::uint64_t>(LONG_MAX))
        throw AudioError("audio of " + std::to_string(mono.size()) + " samples is too long to resample");

    std::vector<float> out(static_cast<std::size_t>(target + kOutputMargin));
    SRC_DATA d{};
    d.data_in = mono.data();
    d.data_out = out.data();
    d.input_frames = static_cast<long>(mono.size());
    d.output_frames = static_cast<long>(out.size());
    d.src_ratio = static_cast<double>(kTargetRate) / static_cast<double>(rate);
    if (const int err = src_simple(&d, static_cast<int>(quality), 1); err != 0)
        throw AudioError(std::string("libsamplerate: ") + src_strerror(err) + " (" + std::to_string(rate) +
                         " Hz → 16000 Hz)");

    const auto generated = static_cast<std::uint64_t>(std::max(0L, d.output_frames_gen));
    const std::size_t kept = static_cast<std::size_t>(std::min(generated, target));
    std::fill(out.begin() + static_cast<std::ptrdiff_t>(kept), out.end(), 0.0f);
    out.resize(static_cast<std::size_t>(target));
    if (notes) {
        std::string line = "resampled " + std::to_string(rate) + " Hz → 16000 Hz with libsamplerate (" +
                           src_get_name(static_cast<int>(quality)) + "): " + std::to_string(generated) +
                           " samples generated";
        if (generated < target)
            line += ", padded with " + std::to_string(target - generated) + " zero(s) to " + std::to_string(target);
        else if (generated > target)
            line += ", trimmed by " + std::to_string(generated - target) + " to " + std::to_string(target);
        notes->push_back(line);
    }
    return out;
}

}  // namespace inkling::protocol::audio
