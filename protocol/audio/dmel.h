// The DMel DSP: 16 kHz mono float → u8 levels [frames][80] (docs/audio.md), and
// the whole path from WAV bytes that the gateway and coli share.
//
//   auto enc = audio::encode_wav_to_dmel(wav_bytes);       // throws audio::AudioError
//   submit.extension += enc.frames;                        // enc.n_frames <|audio|>s
//   std::vector<std::uint8_t> levels = audio::dmel_encode(x16k);  // raw samples
//
// A frame is 50 ms (800 samples). There are F = ceil(n/800) frames for n samples. Frame i
// is the periodic-Hann window of 1600 samples centred on sample 800·i, with zeros outside
// the clip. Then come a 1600-point real FFT (801 bins), the RMS boost for quiet clips
// (s = 0.01/rms if 0 < rms < 0.01, applied to the power), mag = sqrt(max(P, 1e-10)), the
// Slaney mel filterbank (80 bands, 0..8000 Hz, area-normalised) and 16 log levels
// −7 + 0.6k, with ties going to the lower level.
//
// Bit-exact with tools/reference/dmel_ref.py. The choices that make the bytes stable:
// - the window and the filterbank are computed in f64 and cast to f32, with the same
//   formulas as the reference;
// - mag is f32, taken from an f64 spectrum;
// - the mel energy is summed in f64 over ascending bins. A product of two f32 is exact
//   in f64, so the sum has one order and one value whatever the compiler contracts;
// - the level is the exact count #{j : log10(E) > −6.7 + 0.6 j}, decided as E ≥ U_j
//   against precomputed doubles, so no log10 and no libm are involved.
// The only step that is not reproducible bit for bit is the FFT. Ours and numpy's
// pocketfft each have a rounding error of about 1e-16 of the frame's largest bin.
// - Where that error is relatively large (weak bins) it sometimes changes the last bit
//   of an f32 magnitude: up to 1.2e-4 of magnitudes on random clips, measured.
// - A byte changes only if such a one-ulp change (≤ 6e-8 of E) moves E across a level
//   boundary. The chance is about 1e-7 per affected value.
// Measured: 0 of 4.1M levels differ from the reference on random clips (tests/audio/
// dmel_test.cpp pins 27 goldens). The FFT is our own (1600 = 4·4·4·5·5 in f64). FFTW
// was measured too: its magnitudes differ from numpy's as often as ours do, and it is
// GPL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "protocol/audio/audio_error.h"
#include "protocol/audio/resample.h"
#include "protocol/audio/wav.h"

namespace inkling::protocol::audio {

inline constexpr std::size_t kDmelSampleRate = 16000;
inline constexpr std::size_t kDmelHop = 800;       // samples per frame (50 ms)
inline constexpr std::size_t kDmelWindow = 1600;   // window = FFT size (100 ms)
inline constexpr std::size_t kDmelBins = 801;      // rfft bins, k · 10 Hz
inline constexpr std::size_t kDmelBands = 80;      // bytes per frame
inline constexpr int kDmelLevels = 16;             // byte values 0..15
inline constexpr double kDmelRmsTarget = 0.01;

struct DmelOptions {
    // The quiet-clip RMS boost (docs/audio.md). colibri has it (and claims tml-renderers does).
    // HF transformers, sglang, mlx-vlm, TRT-LLM and mlxcel do not. Default on.
    bool rms_boost = true;
};

// ceil(n / 800).
std::size_t dmel_frame_count(std::size_t n_samples);

struct DmelStats {
    double rms = 0;    // sqrt(Σx²/n), f64 over the whole clip
    double boost = 1;  // the scale s applied by the RMS boost (1: none)
};

// The levels, row-major [frames][80]. Throws AudioError for an empty clip or a
// non-finite sample.
std::vector<std::uint8_t> dmel_encode(std::span<const float> samples_16k, const DmelOptions& options = {},
                                      DmelStats* stats = nullptr);

// The f32 Slaney filterbank [80][801], row-major, as the encoder uses it.
std::span<const float> dmel_mel_filterbank();
// The periodic Hann window [1600] in f32.
std::span<const float> dmel_window();
// U_0..U_14: level = #{j : E ≥ U_j} for mel energy E; U_j is the smallest double above
// 10^(−6.7 + 0.6 j), the midpoint between log-level centres j and j+1.
std::span<const double> dmel_level_thresholds();

struct EncodeOptions {
    DmelOptions dmel;
    ResampleQuality quality = ResampleQuality::SincBest;
    // The longest clip accepted, in seconds (0: no limit). Checked from the WAV header
    // (frames / rate) before any sample is decoded or resampled, so a clip over it costs
    // only the header; the resampler's output is bounded by it too.
    double max_seconds = 0;
};

struct EncodedAudio {
    std::vector<std::uint8_t> frames;  // [n_frames][80] levels: the wire's extension bytes
    std::size_t n_frames = 0;          // one <|audio|> placeholder each
    WavFormat format;                  // of the input
    std::size_t samples_16k = 0;       // after resampling
    double rms = 0;                    // of the 16 kHz clip (f64)
    double boost = 1;                  // the RMS boost scale applied (1: none)
    std::vector<std::string> notes;    // WAV irregularities, resampling, boost
};

// read_wav_header → the duration check → decode_wav → resample_to_16k → dmel_encode.
// Throws AudioError (an empty clip and one over max_seconds included).
EncodedAudio encode_wav_to_dmel(std::span<const std::uint8_t> wav, const EncodeOptions& options = {});

}  // namespace inkling::protocol::audio
