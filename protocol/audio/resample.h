// Any sample rate → 16 kHz, through libsamplerate (docs/audio.md, "The DSP, exactly").
//
//   std::vector<float> x16 = audio::resample_to_16k(wav.mono, wav.format.sample_rate);
//
// Mono in, mono out: mix down first (decode_wav does), which costs one channel instead of
// c. 16 kHz input comes back untouched, bit for bit. Any other rate goes through one
// src_simple call with the chosen converter (SRC_SINC_BEST_QUALITY unless told
// otherwise). libsamplerate's sinc converters sometimes yield one sample fewer than
// n·ratio, so the output is then padded with zeros or trimmed to exactly
// resampled_length(n, rate) = ceil(n·16000 / rate) samples. The length, and with it the
// DMel frame count, therefore depends only on n and the rate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/audio/audio_error.h"

namespace inkling::protocol::audio {

inline constexpr std::uint32_t kTargetRate = 16000;
// libsamplerate accepts ratios 1/256..256, i.e. these input rates for a 16 kHz output.
inline constexpr std::uint32_t kMinInputRate = 63;        // ceil(16000 / 256)
inline constexpr std::uint32_t kMaxInputRate = 4096000;   // 16000 · 256

// libsamplerate's converters; the values are its SRC_* enum values.
enum class ResampleQuality { SincBest = 0, SincMedium = 1, SincFastest = 2, ZeroOrderHold = 3, Linear = 4 };

// "best", "medium", "fastest", "zoh", "linear"; parse returns nullopt for anything else.
std::string_view to_string(ResampleQuality quality);
std::optional<ResampleQuality> resample_quality_from_string(std::string_view name);

// ceil(n · 16000 / rate). rate > 0.
std::uint64_t resampled_length(std::uint64_t n, std::uint32_t rate);

// Throws AudioError for a rate outside [kMinInputRate, kMaxInputRate] (unless it is
// 16000), for an output longer than `max_output` samples (checked before anything is
// allocated: at 63 Hz each input sample becomes 254) and for libsamplerate failures. If
// `notes` is given, a line describing the conversion is appended (converter, rate, samples
// generated, padding or trimming).
std::vector<float> resample_to_16k(std::span<const float> mono, std::uint32_t rate,
                                   ResampleQuality quality = ResampleQuality::SincBest,
                                   std::vector<std::string>* notes = nullptr,
                                   std::uint64_t max_output = UINT64_MAX);

}  // namespace inkling::protocol::audio
