#include "protocol/audio/wav.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

namespace inkling::protocol::audio {
namespace {

constexpr std::uint32_t kUnknownSize = 0xFFFFFFFFu;

std::uint16_t u16_at(std::span<const std::uint8_t> b, std::size_t at) {
    return static_cast<std::uint16_t>(b[at] | (b[at + 1] << 8));
}

std::uint32_t u32_at(std::span<const std::uint8_t> b, std::size_t at) {
    return static_cast<std::uint32_t>(b[at]) | (static_cast<std::uint32_t>(b[at + 1]) << 8) |
           (static_cast<std::uint32_t>(b[at + 2]) << 16) | (static_cast<std::uint32_t>(b[at + 3]) << 24);
}

// A chunk or form id for messages: printable ASCII as is, anything else as \xNN.
std::string fourcc(std::span<const std::uint8_t> b, std::size_t at) {
    std::string out = "'";
    for (std::size_t i = 0; i < 4; ++i) {
        const unsigned char c = b[at + i];
        if (c >= 0x20 && c < 0x7F && c != '\'' && c != '\\') {
            out += static_cast<char>(c);
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02X", c);
            out += hex;
        }
    }
    return out + "'";
}

std::string hex16(std::uint32_t v) {
    char s[16];
    std::snprintf(s, sizeof s, "0x%04X", v);
    return s;
}

[[noreturn]] void fail(const std::string& what) { throw AudioError("WAV: " + what); }

std::string tag_name(std::uint32_t tag) {
    switch (tag) {
        case 0x0001: return "PCM";
        case 0x0002: return "Microsoft ADPCM";
        case 0x0003: return "IEEE float";
        case 0x0006: return "A-law";
        case 0x0007: return "mu-law";
        case 0x0011: return "IMA ADPCM";
        case 0x0031: return "GSM 6.10";
        case 0x0050: return "MPEG";
        case 0x0055: return "MP3";
        case 0x00FF: return "AAC";
        case 0xFFFE: return "extensible";
        default: return "unknown";
    }
}

const char* kSupported =
    "supported: PCM 8/16/24/32-bit, IEEE float 32/64-bit, A-law, mu-law, plain or extensible";

SampleEncoding encoding_for(std::uint32_t tag, std::uint16_t bits, bool extensible) {
    const std::string where = extensible ? "extensible SubFormat " : "format tag ";
    switch (tag) {
        case 1:
            switch (bits) {
                case 8: return SampleEncoding::PcmU8;
                case 16: return SampleEncoding::PcmS16;
                case 24: return SampleEncoding::PcmS24;
                case 32: return SampleEncoding::PcmS32;
                default: break;
            }
            fail("unsupported PCM bit depth " + std::to_string(bits) + " (" + kSupported + ")");
        case 3:
            if (bits == 32) return SampleEncoding::Float32;
            if (bits == 64) return SampleEncoding::Float64;
            fail("unsupported IEEE float bit depth " + std::to_string(bits) + " (" + kSupported + ")");
        case 6:
        case 7:
            if (bits == 8) return tag == 6 ? SampleEncoding::ALaw : SampleEncoding::MuLaw;
            fail("unsupported " + tag_name(tag) + " bit depth " + std::to_string(bits) + " (must be 8)");
        default:
            fail("unsupported " + where + hex16(tag) + " (" + tag_name(tag) + "); " + kSupported);
    }
}

// ITU-T G.711 expansions to the 16-bit linear scale.
std::int16_t alaw_to_linear(std::uint8_t a) {
    a ^= 0x55;
    int t = (a & 0x0F) << 4;
    const int seg = (a & 0x70) >> 4;
    if (seg == 0) {
        t += 8;
    } else {
        t += 0x108;
        t <<= seg - 1;
    }
    return static_cast<std::int16_t>((a & 0x80) ? t : -t);
}

std::int16_t mulaw_to_linear(std::uint8_t u) {
    u = static_cast<std::uint8_t>(~u);
    int t = ((u & 0x0F) << 3) + 0x84;
    t <<= (u & 0x70) >> 4;
    return static_cast<std::int16_t>((u & 0x80) ? (0x84 - t) : (t - 0x84));
}

// One sample (one channel of one frame) at `p` as float32.
float sample_at(const std::uint8_t* p, SampleEncoding e) {
    switch (e) {
        case SampleEncoding::PcmU8:
            return static_cast<float>(static_cast<int>(p[0]) - 128) / 128.0f;
        case SampleEncoding::PcmS16:
            return static_cast<float>(static_cast<std::int16_t>(p[0] | (p[1] << 8))) / 32768.0f;
        case SampleEncoding::PcmS24: {
            std::uint32_t v = p[0] | (p[1] << 8) | (static_cast<std::uint32_t>(p[2]) << 16);
            std::int32_t s = static_cast<std::int32_t>(v << 8) >> 8;  // sign-extend 24 bits
            return static_cast<float>(s) / 8388608.0f;
        }
        case SampleEncoding::PcmS32: {
            std::uint32_t v;
            std::memcpy(&v, p, 4);  // little-endian host (x86-64, aarch64)
            return static_cast<float>(static_cast<std::int32_t>(v)) / 2147483648.0f;
        }
        case SampleEncoding::Float32: {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
        case SampleEncoding::Float64: {
            double d;
            std::memcpy(&d, p, 8);
            // Out-of-range narrowing is undefined; such values are rejected by the caller.
            if (!(std::fabs(d) <= static_cast<double>(std::numeric_limits<float>::max())))
                return std::numeric_limits<float>::infinity();
            return static_cast<float>(d);
        }
        case SampleEncoding::ALaw: return static_cast<float>(alaw_to_linear(p[0])) / 32768.0f;
        case SampleEncoding::MuLaw: return static_cast<float>(mulaw_to_linear(p[0])) / 32768.0f;
    }
    return 0.0f;
}

struct Chunk {
    std::size_t offset = 0;  // of the chunk header
    std::size_t body = 0;    // of the body
    std::size_t size = 0;    // body bytes
};

WavFormat parse_fmt(std::span<const std::uint8_t> b, const Chunk& c, std::vector<std::string>& notes) {
    if (c.size < 16)
        fail("'fmt ' chunk is " + std::to_string(c.size) + " bytes; it needs at least 16");
    const auto f = b.subspan(c.body, c.size);
    WavFormat w;
    w.format_tag = u16_at(f, 0);
    w.channels = u16_at(f, 2);
    w.sample_rate = u32_at(f, 4);
    const std::uint32_t byte_rate = u32_at(f, 8);
    w.block_align = u16_at(f, 12);
    w.bits_per_sample = u16_at(f, 14);
    w.valid_bits = w.bits_per_sample;
    if (w.channels == 0) fail("'fmt ' chunk says 0 channels");
    if (w.sample_rate == 0) fail("'fmt ' chunk says a sample rate of 0 Hz");

    std::uint32_t tag = w.format_tag;
    if (tag == 0xFFFE) {
        w.extensible = true;
        if (c.size < 40)
            fail("WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk is " + std::to_string(c.size) +
                 " bytes; it needs 40");
        const std::uint16_t cb_size = u16_at(f, 16);
        if (cb_size < 22)
            fail("WAVE_FORMAT_EXTENSIBLE cbSize is " + std::to_string(cb_size) + "; it needs 22");
        const std::uint16_t valid = u16_at(f, 18);
        // KSDATAFORMAT_SUBTYPE_*: {tag-0000-0010-8000-00AA00389B71}, stored little-endian.
        static constexpr std::uint8_t kGuidTail[12] = {0x00, 0x00, 0x10, 0x00, 0x80, 0x00,
                                                       0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
        if (std::memcmp(f.data() + 28, kGuidTail, sizeof kGuidTail) != 0) {
            std::string guid;
            for (std::size_t i = 24; i < 40; ++i) {
                char h[4];
                std::snprintf(h, sizeof h, "%02X", f[i]);
                guid += h;
            }
            fail("unsupported WAVE_FORMAT_EXTENSIBLE SubFormat GUID (bytes " + guid +
                 "); only the standard PCM / IEEE float / A-law / mu-law subtypes are read");
        }
        tag = u32_at(f, 24);
        if (valid > w.bits_per_sample)
            fail("wValidBitsPerSample " + std::to_string(valid) + " exceeds wBitsPerSample " +
                 std::to_string(w.bits_per_sample));
        if (valid != 0) w.valid_bits = valid;
    }
    w.encoding = encoding_for(tag, w.bits_per_sample, w.extensible);
    const std::uint32_t expect_align = static_cast<std::uint32_t>(w.channels) * (w.bits_per_sample / 8u);
    if (w.block_align != expect_align)
        fail("block_align is " + std::to_string(w.block_align) + " but " + std::to_string(w.channels) +
             " channel(s) of " + std::to_string(w.bits_per_sample) + "-bit samples need " +
             std::to_string(expect_align));
    if (static_cast<std::uint64_t>(byte_rate) != static_cast<std::uint64_t>(w.sample_rate) * w.block_align)
        notes.push_back("byte_rate field " + std::to_string(byte_rate) + " disagrees with rate × block_align (" +
                        std::to_string(static_cast<std::uint64_t>(w.sample_rate) * w.block_align) +
                        "); it is not used");
    return w;
}

}  // namespace

std::string_view to_string(SampleEncoding encoding) {
    switch (encoding) {
        case SampleEncoding::PcmU8: return "pcm_u8";
        case SampleEncoding::PcmS16: return "pcm_s16";
        case SampleEncoding::PcmS24: return "pcm_s24";
        case SampleEncoding::PcmS32: return "pcm_s32";
        case SampleEncoding::Float32: return "float32";
        case SampleEncoding::Float64: return "float64";
        case SampleEncoding::ALaw: return "alaw";
        case SampleEncoding::MuLaw: return "mulaw";
    }
    return "?";
}

WavHeader read_wav_header(std::span<const std::uint8_t> b) {
    WavHeader out;
    if (b.size() < 12)
        fail("not a WAV file: " + std::to_string(b.size()) + " bytes is too short for a RIFF header");
    const auto id_is = [&](std::size_t at, const char* id) { return std::memcmp(b.data() + at, id, 4) == 0; };
    if (id_is(0, "RIFX")) fail("big-endian RIFX files are not supported");
    if (id_is(0, "RF64")) fail("RF64 (64-bit RIFF) files are not supported");
    if (!id_is(0, "RIFF")) fail("not a RIFF file (it starts with " + fourcc(b, 0) + ", expected 'RIFF')");
    if (!id_is(8, "WAVE")) fail("RIFF form type is " + fourcc(b, 8) + ", expected 'WAVE'");

    // The RIFF form: [0, riff_end). Streaming writers leave 0 or 0xFFFFFFFF.
    const std::uint32_t riff_size = u32_at(b, 4);
    std::size_t riff_end;
    if (riff_size == 0 || riff_size == kUnknownSize) {
        riff_end = b.size();
        out.notes.push_back("RIFF size field is " + hex16(riff_size) +
                            " (unknown length); read to the end of the file");
    } else {
        const std::uint64_t declared = 8ull + riff_size;
        if (declared > b.size())
            fail("truncated: the RIFF header declares " + std::to_string(declared) + " bytes, the file has " +
                 std::to_string(b.size()));
        if (declared < 12) fail("RIFF size field " + std::to_string(riff_size) + " is smaller than the form type");
        riff_end = static_cast<std::size_t>(declared);
        if (riff_end < b.size())
            out.notes.push_back("ignored " + std::to_string(b.size() - riff_end) +
                                " byte(s) after the RIFF form");
    }

    std::optional<Chunk> fmt, data;
    bool data_to_end = false;
    std::size_t pos = 12;
    while (riff_end - pos >= 8) {
        Chunk c{pos, pos + 8, u32_at(b, pos + 4)};
        const bool is_fmt = id_is(pos, "fmt ");
        const bool is_data = id_is(pos, "data");
        const std::size_t room = riff_end - c.body;
        if (is_data && c.size == kUnknownSize) {
            c.size = room;
            data_to_end = true;
        }
        if (c.size > room)
            fail("truncated " + fourcc(b, pos) + " chunk at offset " + std::to_string(pos) + ": it declares " +
                 std::to_string(c.size) + " bytes, " + std::to_string(room) + " remain");
        if (is_fmt) {
            if (fmt) fail("two 'fmt ' chunks (offsets " + std::to_string(fmt->offset) + " and " +
                          std::to_string(pos) + ")");
            fmt = c;
        } else if (is_data) {
            if (data) fail("two 'data' chunks (offsets " + std::to_string(data->offset) + " and " +
                           std::to_string(pos) + ")");
            data = c;
        }
        // Odd sizes are followed by a pad byte, which may be missing at the very end.
        const std::size_t advance = c.size + (c.size & 1u);
        if (advance >= riff_end - c.body) {
            pos = riff_end;
            break;
        }
        pos = c.body + advance;
    }
    if (pos < riff_end)
        out.notes.push_back("ignored " + std::to_string(riff_end - pos) + " trailing byte(s) after the last chunk");
    if (data_to_end) out.notes.push_back("data size field is 0xFFFFFFFF (unknown length); read to the end");
    if (!fmt) fail("no 'fmt ' chunk");
    if (!data) fail("no 'data' chunk");

    out.format = parse_fmt(b, *fmt, out.notes);
    const std::size_t align = out.format.block_align;
    out.frames = data->size / align;
    out.data_offset = data->body;
    if (const std::size_t rest = data->size % align; rest != 0)
        out.notes.push_back("dropped a partial sample frame: " + std::to_string(rest) +
                            " byte(s) at the end of the data chunk");
    return out;
}

WavAudio decode_wav(std::span<const std::uint8_t> b) { return decode_wav(b, read_wav_header(b)); }

WavAudio decode_wav(std::span<const std::uint8_t> b, WavHeader header) {
    WavAudio out;
    out.format = header.format;
    out.notes = std::move(header.notes);
    const WavFormat& w = out.format;
    const std::size_t frames = header.frames;
    const std::size_t width = w.bits_per_sample / 8u;
    const bool is_float = w.encoding == SampleEncoding::Float32 || w.encoding == SampleEncoding::Float64;
    out.mono.resize(frames);
    const std::uint8_t* p = b.data() + header.data_offset;
    for (std::size_t i = 0; i < frames; ++i) {
        float acc = 0.0f;
        for (std::size_t ch = 0; ch < w.channels; ++ch, p += width) {
            const float s = sample_at(p, w.encoding);
            if (is_float && !std::isfinite(s))
                fail("sample frame " + std::to_string(i) + ", channel " + std::to_string(ch) +
                     " is not a finite float32 value (NaN, infinity or out of float32 range)");
            acc = ch == 0 ? s : acc + s;
        }
        out.mono[i] = w.channels == 1 ? acc : acc / static_cast<float>(w.channels);
        if (!std::isfinite(out.mono[i]))
            fail("sample frame " + std::to_string(i) + ": the channel sum overflows float32");
    }
    return out;
}

}  // namespace inkling::protocol::audio
