// build/inkling-dmel: encodes a WAV file as DMel frames (raw u8 [frames][80], the `.dmel`
// files that `inkling run --audio` reads). It is the same encoder the gateway uses.
//
//   inkling-dmel IN.wav OUT.dmel [--json] [--boost on|off] [--quality best|medium|fastest|zoh|linear]
//                            [--dump-16k F.f32]
//
// --json prints one JSON object: the input's format, sample and frame counts, rms, the
// boost applied, and notes. --dump-16k writes the 16 kHz mono float32 samples that were
// encoded; tools/reference/dmel_ref.py takes that file as its input. Errors go to stderr
// as "inkling-dmel: …". Bad input exits 2, an I/O failure exits 1. The flags are declared
// in tools/dmel/options.cpp (docs/configuration.md).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "protocol/cli/cxxopts.h"
#include <nlohmann/json.hpp>

#include "protocol/audio/dmel.h"
#include "protocol/cli/cxxopts_bind.h"
#include "tools/dmel/options.h"

namespace {

namespace audio = inkling::protocol::audio;

std::vector<std::uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) throw std::runtime_error("cannot read " + path);
    return bytes;
}

void write_file(const std::string& path, const void* data, std::size_t size) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    f.close();
    if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
    const auto& program = inkling::dmel::program();
    try {
        cxxopts::Options options("inkling-dmel");
        inkling::cli::add_options(options, program);
        auto args = options.parse(argc, argv);
        if (args.count("help")) {
            std::cout << inkling::cli::help(program) << "\n";
            return 0;
        }
        inkling::cli::check_applies(args, program, "");
        if (!args.count("input") || !args.count("output")) {
            std::fprintf(stderr, "%s\n", inkling::cli::help(program).c_str());
            return 2;
        }
        const std::string in = args["input"].as<std::string>(), out = args["output"].as<std::string>();
        audio::EncodeOptions opt;
        const std::string boost = args["boost"].as<std::string>();
        if (boost != "on" && boost != "off") throw cxxopts::exceptions::exception("--boost: '" + boost + "' is not on or off");
        opt.dmel.rms_boost = boost == "on";
        const std::string q = args["quality"].as<std::string>();
        const auto quality = audio::resample_quality_from_string(q);
        if (!quality) throw cxxopts::exceptions::exception("--quality: '" + q + "' is not best, medium, fastest, zoh or linear");
        opt.quality = *quality;

        const std::vector<std::uint8_t> bytes = read_file(in);
        audio::EncodedAudio enc;
        try {
            enc = audio::encode_wav_to_dmel(bytes, opt);
            if (args.count("dump-16k")) {
                const audio::WavAudio wav = audio::decode_wav(bytes);
                const std::vector<float> x = audio::resample_to_16k(wav.mono, wav.format.sample_rate, opt.quality);
                write_file(args["dump-16k"].as<std::string>(), x.data(), x.size() * sizeof(float));
            }
        } catch (const audio::AudioError& e) {
            std::fprintf(stderr, "inkling-dmel: %s: %s\n", in.c_str(), e.what());
            return 2;
        }
        write_file(out, enc.frames.data(), enc.frames.size());
        if (args["json"].as<bool>()) {
            const auto& f = enc.format;
            nlohmann::json j;
            j["input"] = in;
            j["output"] = out;
            j["format"] = {{"encoding", std::string(audio::to_string(f.encoding))},
                           {"format_tag", f.format_tag},
                           {"extensible", f.extensible},
                           {"channels", f.channels},
                           {"sample_rate", f.sample_rate},
                           {"bits_per_sample", f.bits_per_sample},
                           {"valid_bits", f.valid_bits}};
            j["resampler"] = f.sample_rate == audio::kTargetRate ? "none" : std::string(audio::to_string(opt.quality));
            j["samples_16k"] = enc.samples_16k;
            j["seconds"] = static_cast<double>(enc.samples_16k) / audio::kTargetRate;
            j["n_frames"] = enc.n_frames;
            j["bytes"] = enc.frames.size();
            j["rms"] = enc.rms;
            j["rms_boost"] = opt.dmel.rms_boost;
            j["boost"] = enc.boost;
            j["notes"] = enc.notes;
            std::cout << j.dump(2) << "\n";
        }
        return 0;
    } catch (const cxxopts::exceptions::exception& e) {
        std::fprintf(stderr, "inkling-dmel: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "inkling-dmel: %s\n", e.what());
        return 1;
    }
}
