// Arbitrary bytes through the WAV parser and the audio encoder: no crash, no read out of
// bounds (ASan), only AudioError thrown; the header agrees with the decode (frames, format);
// a clip over max_seconds is refused from its header alone (no sample decoded).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "protocol/audio/dmel.h"
#include "protocol/audio/wav.h"

namespace audio = inkling::protocol::audio;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span bytes(data, size);
    audio::WavHeader head;
    try {
        head = audio::read_wav_header(bytes);
    } catch (const audio::AudioError&) {
        return 0;
    }
    try {
        const audio::WavAudio wav = audio::decode_wav(bytes);
        if (wav.mono.size() != head.frames || wav.format.sample_rate != head.format.sample_rate ||
            wav.format.channels != head.format.channels)
            std::abort();
    } catch (const audio::AudioError&) {
    }
    // The encoder with a small duration limit keeps each run cheap, and it must never
    // resample more than the limit allows.
    audio::EncodeOptions o;
    o.max_seconds = 0.5;
    o.quality = audio::ResampleQuality::Linear;
    try {
        const auto enc = audio::encode_wav_to_dmel(bytes, o);
        if (enc.samples_16k > 8000 || enc.frames.size() != enc.n_frames * audio::kDmelBands) std::abort();
        for (auto b : enc.frames)
            if (b > 15) std::abort();
    } catch (const audio::AudioError&) {
    }
    return 0;
}
