// A strict RIFF/WAVE decoder. It turns WAV bytes into mono float32 at the file's own rate.
//
//   auto head = audio::read_wav_header(bytes);     // throws audio::AudioError
//   if (head.frames > limit * head.format.sample_rate) refuse();  // nothing decoded yet
//   auto wav = audio::decode_wav(bytes, head);     // throws audio::AudioError
//   wav.format.sample_rate, wav.mono (f32, mean over channels), wav.notes
//
// Supported: PCM 8 (unsigned), 16, 24 and 32 bit; IEEE float 32 and 64 bit; A-law and
// µ-law; each either plain or as WAVE_FORMAT_EXTENSIBLE. Extensible files are read by
// their SubFormat GUID, never guessed from the bit width. Any channel count and any
// nonzero rate are accepted. Integers scale by 1/2^(bits−1), so PCM16 is ÷ 32768. Floats
// are taken as they are, except that a NaN or an infinity is rejected. Channels are
// averaged in f32: a sequential sum over channels, then one division (docs/audio.md).
//
// Strict means that anything ambiguous or damaged is an AudioError naming what is wrong:
// not RIFF/WAVE, a chunk that runs past the end, no or two fmt/data chunks, an unknown
// format tag, bit depth or SubFormat, block_align disagreeing with channels × sample
// size, zero channels or rate. Only harmless irregularities are tolerated, and each one
// adds a line to `notes`:
// - a partial sample frame at the end of the data (dropped);
// - bytes after the RIFF form or after the last chunk (ignored);
// - the "unknown length" sizes 0 / 0xFFFFFFFF that streaming writers leave in the
//   RIFF header, and 0xFFFFFFFF in the data header (read to the end of the file);
// - a byte_rate field that disagrees (it is not used).
// A pad byte missing after an odd-sized final chunk is tolerated without a note.
// Hostile bytes never crash the parser or read out of bounds. Sizes are checked
// before they are used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/audio/audio_error.h"

namespace inkling::protocol::audio {

enum class SampleEncoding { PcmU8, PcmS16, PcmS24, PcmS32, Float32, Float64, ALaw, MuLaw };

// "pcm_u8", "pcm_s16", "pcm_s24", "pcm_s32", "float32", "float64", "alaw", "mulaw".
std::string_view to_string(SampleEncoding encoding);

struct WavFormat {
    std::uint16_t format_tag = 0;   // as written: 1, 3, 6, 7 or 0xFFFE
    bool extensible = false;        // format_tag == 0xFFFE; encoding came from SubFormat
    SampleEncoding encoding = SampleEncoding::PcmS16;
    std::uint16_t channels = 0;
    std::uint32_t sample_rate = 0;
    std::uint16_t bits_per_sample = 0;  // container bits (8, 16, 24, 32, 64)
    std::uint16_t valid_bits = 0;       // extensible wValidBitsPerSample, else = bits
    std::uint16_t block_align = 0;      // bytes per sample frame (all channels)
};

struct WavAudio {
    WavFormat format;
    std::vector<float> mono;         // one sample per frame: the mean over channels
    std::vector<std::string> notes;  // tolerated irregularities, one sentence each
};

// What the chunks say, before any sample is decoded: enough to know a clip's duration
// (frames / format.sample_rate) and refuse it before paying for it.
struct WavHeader {
    WavFormat format;
    std::size_t frames = 0;       // whole sample frames in the data chunk
    std::size_t data_offset = 0;  // where the data chunk's body starts
    std::vector<std::string> notes;
};

// Throws AudioError on anything the header comment lists as strict (but the samples).
WavHeader read_wav_header(std::span<const std::uint8_t> bytes);

// Throws AudioError on anything the header comment lists as strict. The second form takes
// the header read_wav_header gave for the same bytes.
WavAudio decode_wav(std::span<const std::uint8_t> bytes);
WavAudio decode_wav(std::span<const std::uint8_t> bytes, WavHeader header);

}  // namespace inkling::protocol::audio
