#include "protocol/audio/dmel.h"

#include "protocol/fields.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>

namespace inkling::protocol::audio {
namespace {

using cd = std::complex<double>;

// The plain product: std::complex's operator* adds NaN/inf recovery we do not need.
inline cd mul(cd a, cd b) {
    return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

// U_j: the smallest double greater than 10^(−6.7 + 0.6 j). Then log10(E) > b_j ⇔ E ≥ U_j
// exactly for every double E, because 10^b_j is irrational and so never a double.
// tools/reference/dmel_ref.py --self-check recomputes them at 80 digits.
constexpr std::array<double, kDmelLevels - 1> kLevelThresholds = {
    0x1.ac7ab4ae8f68cp-23, 0x1.aa73a42bd409fp-21, 0x1.a86f0875fcf95p-19, 0x1.a66cde934de84p-17,
    0x1.a46d238da54e8p-15, 0x1.a26fd472780c5p-13, 0x1.a074ee52cd11bp-11, 0x1.9e7c6e43390b7p-9,
    0x1.9c86515bda14dp-7,  0x1.9a9294b8536ebp-5,  0x1.98a13577c93c0p-3,  0x1.96b230bcdc435p-1,
    0x1.94c583ada5b53p+1,  0x1.92db2b73b2f85p+3,  0x1.90f3253c017a1p+5,
};

constexpr double kPowerFloor = 1e-10;
// Doubles at or above this round to +inf as float (FLT_MAX + half an ulp, ties to even).
constexpr double kFloatOverflow = 0x1.ffffffp+127;

// A mixed-radix complex FFT (decimation in time) for N = 1600 = 4·4·4·5·5, in f64.
// Twiddles are built from the first octant by symmetry, so the quarter turns are exact.
class Fft {
public:
    static constexpr std::size_t N = kDmelWindow;

    Fft() : twiddle_(N) {
        for (std::size_t k = 0; k < N; ++k) twiddle_[k] = root(k);
    }

    // out[k] = Σ_j in[j]·e^(−2πi·jk/N).
    void forward(const cd* in, cd* out) const { pass(in, out, N, 1, 0); }

private:
    static constexpr std::array<std::size_t, 5> kRadices = {4, 4, 4, 5, 5};

    // e^(−2πi·k/N), with cos and sin evaluated only for angles in [0, π/4].
    static cd root(std::size_t k) {
        static_assert(N % 8 == 0);
        k %= N;
        // Work with t = k/N turns. Fold [π, 2π) onto [0, π) (negate sin), [π/2, π) onto
        // [0, π/2) (rotate), [π/4, π/2) onto [0, π/4] (swap).
        bool neg_sin = false;
        if (2 * k > N) {
            k = N - k;
            neg_sin = true;
        }
        double c, s;
        auto first_quadrant = [](std::size_t q, double& cq, double& sq) {
            if (8 * q <= N) {
                const double a = 2.0 * std::numbers::pi * static_cast<double>(q) / static_cast<double>(N);
                cq = std::cos(a);
                sq = std::sin(a);
            } else {
                const double a = 2.0 * std::numbers::pi * static_cast<double>(N / 4 - q) / static_cast<double>(N);
                cq = std::sin(a);
                sq = std::cos(a);
            }
        };
        if (4 * k >= N) {  // angle = π/2 + rest
            double cr, sr;
            first_quadrant(k - N / 4, cr, sr);
            c = -sr;
            s = cr;
        } else {
            first_quadrant(k, c, s);
        }
        if (neg_sin) s = -s;
        return {c, -s};  // the forward transform's e^(−iθ)
    }

    // Transforms the n inputs in[0], in[stride], …, in[(n−1)·stride] into out[0..n).
    void pass(const cd* in, cd* out, std::size_t n, std::size_t stride, std::size_t level) const {
        if (n == 1) {
            out[0] = in[0];
            return;
        }
        const std::size_t p = kRadices[level];
        const std::size_t m = n / p;
        for (std::size_t q = 0; q < p; ++q) pass(in + q * stride, out + q * m, m, stride * p, level + 1);
        const std::size_t tw_step = N / n;  // e^(−2πi/n) = twiddle_[tw_step]
        std::array<cd, 5> t;
        for (std::size_t u = 0; u < m; ++u) {
            for (std::size_t q = 0; q < p; ++q) t[q] = mul(out[u + q * m], twiddle_[(q * u * tw_step) % N]);
            if (p == 4) {
                const cd a = t[0] + t[2], b = t[0] - t[2], c = t[1] + t[3], d = t[1] - t[3];
                const cd d_mi{d.imag(), -d.real()};  // d · (−i)
                out[u] = a + c;
                out[u + m] = b + d_mi;
                out[u + 2 * m] = a - c;
                out[u + 3 * m] = b - d_mi;
            } else {
                for (std::size_t r = 0; r < p; ++r) {
                    cd acc = t[0];
                    for (std::size_t q = 1; q < p; ++q) acc += mul(t[q], twiddle_[(q * r % p) * (N / p)]);
                    out[u + r * m] = acc;
                }
            }
        }
    }

    std::vector<cd> twiddle_;
};

// The Slaney mel scale (docs/audio.md), f64.
constexpr double kMelLinearHz = 200.0 / 3.0;
double mel_log_step() { return std::log(6.4) / 27.0; }

double hz_to_mel(double hz) {
    return hz < 1000.0 ? hz / kMelLinearHz : 15.0 + std::log(hz / 1000.0) / mel_log_step();
}
double mel_to_hz(double mel) {
    return mel < 15.0 ? kMelLinearHz * mel : 1000.0 * std::exp(mel_log_step() * (mel - 15.0));
}

// Everything that does not depend on the clip, built once.
struct Tables {
    std::vector<float> window;       // [1600]
    std::vector<float> filterbank;   // [80][801]
    struct Band {
        std::size_t first = 0;       // first nonzero bin
        std::vector<double> weight;  // f32 weights widened, for bins first, first+1, …
    };
    std::vector<Band> bands;         // [80]
    Fft fft;

    Tables() : window(kDmelWindow), filterbank(kDmelBands * kDmelBins), bands(kDmelBands) {
        for (std::size_t j = 0; j < kDmelWindow; ++j)
            window[j] = static_cast<float>(
                0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(kDmelWindow)));

        const double mel_max = hz_to_mel(8000.0);
        const double step = mel_max / static_cast<double>(kDmelBands + 1);
        std::array<double, kDmelBands + 2> edge;
        for (std::size_t i = 0; i <= kDmelBands; ++i) edge[i] = mel_to_hz(static_cast<double>(i) * step);
        edge[kDmelBands + 1] = mel_to_hz(mel_max);
        for (std::size_t m = 0; m < kDmelBands; ++m) {
            const double lo = edge[m], c = edge[m + 1], hi = edge[m + 2];
            const double norm = 2.0 / (hi - lo);
            Band& band = bands[m];
            std::size_t last = 0;
            bool any = false;
            for (std::size_t k = 0; k < kDmelBins; ++k) {
                const double f = 10.0 * static_cast<double>(k);
                const double t = std::min((f - lo) / (c - lo), (hi - f) / (hi - c));
                const float w = static_cast<float>(std::max(0.0, t) * norm);
                filterbank[m * kDmelBins + k] = w;
                if (w != 0.0f) {
                    if (!any) band.first = k;
                    any = true;
                    last = k;
                }
            }
            if (any)
                for (std::size_t k = band.first; k <= last; ++k)
                    band.weight.push_back(static_cast<double>(filterbank[m * kDmelBins + k]));
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

}  // namespace

std::size_t dmel_frame_count(std::size_t n_samples) { return (n_samples + kDmelHop - 1) / kDmelHop; }

std::span<const float> dmel_mel_filterbank() { return tables().filterbank; }
std::span<const float> dmel_window() { return tables().window; }
std::span<const double> dmel_level_thresholds() { return kLevelThresholds; }

std::vector<std::uint8_t> dmel_encode(std::span<const float> x, const DmelOptions& options, DmelStats* stats) {
    if (x.empty()) throw AudioError("audio clip is empty");
    double sum_sq = 0.0;
    for (std::size_t t = 0; t < x.size(); ++t) {
        if (!std::isfinite(x[t]))
            throw AudioError("audio sample " + std::to_string(t) + " is not finite (NaN or infinity)");
        const double v = x[t];
        sum_sq += v * v;
    }
    // The boost (docs/audio.md): power × s², which is the waveform scaled by s.
    const double rms = std::sqrt(sum_sq / static_cast<double>(x.size()));
    double scale2 = 1.0, scale = 1.0;
    if (options.rms_boost && rms > 0.0 && rms < kDmelRmsTarget) {
        scale = kDmelRmsTarget / rms;
        scale2 = scale * scale;
    }
    if (stats) *stats = {rms, scale};

    const Tables& tb = tables();
    const std::size_t n = x.size();
    const std::size_t frames = dmel_frame_count(n);
    std::vector<std::uint8_t> out(frames * kDmelBands);
    std::vector<cd> in(kDmelWindow), spec(kDmelWindow);
    std::array<double, kDmelBins> mag;
    for (std::size_t i = 0; i < frames; ++i) {
        // Frame i covers samples [800 i − 800, 800 i + 800); zeros outside the clip.
        for (std::size_t j = 0; j < kDmelWindow; ++j) {
            const std::size_t t = kDmelHop * i + j;  // signal index + 800
            const float v = (t >= kDmelHop && t - kDmelHop < n) ? x[t - kDmelHop] : 0.0f;
            const float prod = v * tb.window[j];  // an f32 product, as in the reference
            in[j] = cd(static_cast<double>(prod), 0.0);
        }
        tb.fft.forward(in.data(), spec.data());
        for (std::size_t k = 0; k < kDmelBins; ++k) {
            const double re = spec[k].real(), im = spec[k].imag();
            double p = re * re + im * im;
            if (scale2 != 1.0) p *= scale2;
            const double m = std::sqrt(std::max(p, kPowerFloor));
            const float m32 = m >= kFloatOverflow ? std::numeric_limits<float>::infinity() : static_cast<float>(m);
            mag[k] = static_cast<double>(m32);
        }
        std::uint8_t* row = out.data() + i * kDmelBands;
        for (std::size_t b = 0; b < kDmelBands; ++b) {
            const auto& band = tb.bands[b];
            double e = 0.0;
            for (std::size_t q = 0; q < band.weight.size(); ++q) e += band.weight[q] * mag[band.first + q];
            row[b] = static_cast<std::uint8_t>(
                std::upper_bound(kLevelThresholds.begin(), kLevelThresholds.end(), e) - kLevelThresholds.begin());
        }
    }
    return out;
}

EncodedAudio encode_wav_to_dmel(std::span<const std::uint8_t> bytes, const EncodeOptions& options) {
    EncodedAudio enc;
    WavHeader header = read_wav_header(bytes);
    // The 16 kHz length follows from the header alone; refuse a long clip before decoding
    // (a 2 MB file at 63 Hz is 8.8 hours, 2 GB once resampled).
    const std::uint32_t rate = header.format.sample_rate;
    const std::uint64_t samples_16k = rate == kTargetRate ? header.frames : resampled_length(header.frames, rate);
    std::uint64_t max_16k = UINT64_MAX;
    if (options.max_seconds > 0) {
        max_16k = static_cast<std::uint64_t>(std::ceil(options.max_seconds * kTargetRate));
        if (samples_16k > max_16k)
            throw AudioError("the clip lasts " + format_fixed(static_cast<double>(header.frames) / rate, 1) + " s (" +
                             std::to_string(header.frames) + " sample frames at " + std::to_string(rate) +
                             " Hz), over the limit of " + format_fixed(options.max_seconds, 1) + " s");
    }
    WavAudio wav = decode_wav(bytes, std::move(header));
    enc.format = wav.format;
    enc.notes = std::move(wav.notes);
    if (wav.mono.empty()) throw AudioError("audio clip is empty (the WAV data chunk holds no sample frames)");
    if (wav.format.channels > 1)
        enc.notes.push_back("mixed " + std::to_string(wav.format.channels) + " channels down to mono");
    std::vector<float> x = resample_to_16k(wav.mono, wav.format.sample_rate, options.quality, &enc.notes, max_16k);
    wav.mono = {};
    enc.samples_16k = x.size();
    DmelStats stats;
    enc.frames = dmel_encode(x, options.dmel, &stats);
    enc.rms = stats.rms;
    enc.boost = stats.boost;
    enc.n_frames = enc.frames.size() / kDmelBands;
    if (enc.boost != 1.0)
        enc.notes.push_back("quiet clip (rms " + std::to_string(enc.rms) + "): RMS boost ×" +
                            std::to_string(enc.boost) + " to rms 0.01");
    return enc;
}

}  // namespace inkling::protocol::audio
