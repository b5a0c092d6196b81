#!/usr/bin/env bash
# Regenerates the audio fixtures of tests/audio/dmel_test.cpp under tests/fixtures/audio/:
# the input clips and the DMel bytes tools/reference/dmel_ref.py computes for them.
#
#   tools/reference/make_audio_goldens.sh           # new clips + new goldens + manifest.tsv
#   tools/reference/make_audio_goldens.sh --check   # recompute the goldens from the committed
#                                                   # clips and compare; changes nothing
#
# Needs the Debian packages espeak-ng, sox, python3-numpy and libsamplerate0 (the
# reference resamples through libsamplerate, the library the C++ links). The check
# needs only the last two. Run with /usr/bin/python3 (Debian's numpy), not the pyenv
# python on PATH.
#
# Clips:
# - speech_*.wav: espeak-ng speech converted by sox (no dither) to 8, 16, 22.05, 44.1 and
#   48 kHz, in mono and stereo, as PCM16 and float32. sox writes WAVE_FORMAT_EXTENSIBLE
#   for the 3-channel 24-bit case. sox only makes the inputs: the C++ and the
#   reference both resample them with libsamplerate. The stereo channels carry
#   different speech, so a wrong mixdown shows.
# - synth_*.f32: raw 16 kHz float32 made by numpy with fixed seeds (silence, sines,
#   noise, a chirp, quiet and loud clips, lengths around frame boundaries). They go
#   straight into dmel_encode.
# manifest.tsv holds one line per golden. It gives the input, whether the RMS boost is on,
# the golden file, the frame count, the 16 kHz sample count, and an FNV-1a-64 of the 16 kHz
# float32 samples, which pins the decode + mixdown + libsamplerate step by itself.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="$ROOT/tests/fixtures/audio"
PY=/usr/bin/python3
MODE="${1:-generate}"

if [[ "$MODE" != "--check" && "$MODE" != "generate" ]]; then
    echo "usage: $0 [--check]" >&2
    exit 2
fi

if [[ "$MODE" == "generate" ]]; then
    for tool in espeak-ng sox; do
        command -v "$tool" > /dev/null || { echo "$0: $tool is missing (apt-get install $tool)" >&2; exit 2; }
    done
    mkdir -p "$OUT"
    rm -f "$OUT"/*.wav "$OUT"/*.f32 "$OUT"/*.dmel "$OUT"/manifest.tsv
    TMP="$(mktemp -d)"
    trap 'rm -rf "$TMP"' EXIT

    # Two voices, two phrases, 22050 Hz mono PCM16 from espeak-ng.
    espeak-ng -v en-us -s 190 -w "$TMP/a.wav" "Hello, audio one two three."
    espeak-ng -v en-gb+f3 -s 210 -w "$TMP/b.wav" "Seven, eight, nine."

    # mk NAME RATE CHANNELS ENCODING(s16|f32|s24) SECONDS [extra sox effects…]
    mk() {
        local name=$1 rate=$2 ch=$3 enc=$4 secs=$5
        shift 5
        local fmt
        case $enc in
            s16) fmt=(-e signed-integer -b 16) ;;
            s24) fmt=(-e signed-integer -b 24) ;;
            f32) fmt=(-e floating-point -b 32) ;;
        esac
        local src="$TMP/a.wav"
        if [[ $ch == 2 ]]; then
            sox -D -M "$TMP/a.wav" "$TMP/b.wav" "$TMP/st.wav"
            src="$TMP/st.wav"
        elif [[ $ch == 3 ]]; then
            sox -D "$TMP/a.wav" "$TMP/a_late.wav" pad 0.07 0
            sox -D -M "$TMP/a.wav" "$TMP/b.wav" "$TMP/a_late.wav" "$TMP/st3.wav"
            src="$TMP/st3.wav"
        fi
        sox -D "$src" -r "$rate" "${fmt[@]}" "$OUT/$name.wav" trim 0 "$secs" "$@"
    }
    mk speech_8k_mono_s16        8000 1 s16 1.3
    mk speech_16k_mono_s16      16000 1 s16 1.3
    mk speech_16k_stereo_f32    16000 2 f32 0.7
    mk speech_22k_mono_f32      22050 1 f32 1.0
    mk speech_22k_stereo_s16    22050 2 s16 1.0
    mk speech_44k_mono_f32      44100 1 f32 0.5
    mk speech_44k_stereo_s16    44100 2 s16 0.6
    mk speech_48k_mono_s16      48000 1 s16 1.0
    mk speech_48k_stereo_f32    48000 2 f32 0.35
    mk speech_22k_3ch_s24       22050 3 s24 0.5
    mk speech_16k_quiet_s16     16000 1 s16 1.0 vol 0.004
fi

"$PY" - "$OUT" "$MODE" "$HERE" <<'PYEOF'
import os
import sys

import numpy as np

out, mode, here = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, here)
import dmel_ref as ref  # noqa: E402

if ref.check_thresholds():
    sys.exit("dmel_ref level thresholds are wrong")

SR = 16000


def synth():
    """name -> float32 array at 16 kHz (deterministic)."""
    t = lambda n: np.arange(n, dtype=np.float64) / SR  # noqa: E731
    rng = np.random.default_rng(20240611)
    s = {}
    s["synth_silence_9600"] = np.zeros(9600)
    s["synth_sine440_loud"] = 0.5 * np.sin(2 * np.pi * 440.0 * t(8000))
    n = 12001
    s["synth_sines_quiet"] = 0.001 * (np.sin(2 * np.pi * 1000.0 * t(n)) + 0.5 * np.sin(2 * np.pi * 3137.0 * t(n)))
    s["synth_noise_white"] = 0.1 * rng.standard_normal(12001)
    s["synth_noise_quiet"] = 3e-4 * rng.standard_normal(8000)
    tt = t(16000)
    s["synth_chirp"] = 0.3 * np.sin(2 * np.pi * (50.0 * tt + 0.5 * (7900.0 - 50.0) / 1.0 * tt * tt))
    s["synth_loud_noise"] = 30.0 * rng.standard_normal(4000)
    s["synth_one_sample"] = np.array([0.25])
    s["synth_800"] = 0.2 * rng.standard_normal(800)
    s["synth_801"] = 0.2 * rng.standard_normal(801)
    burst = np.zeros(8800)
    burst[4000:4400] = 0.8 * rng.standard_normal(400)
    s["synth_burst_in_silence"] = burst
    return {k: v.astype(np.float32) for k, v in s.items()}


# (golden name, input file, kind, boost)
cases = []
if mode == "generate":
    for name, x in synth().items():
        x.astype("<f4").tofile(os.path.join(out, name + ".f32"))
for f in sorted(os.listdir(out)):
    stem, ext = os.path.splitext(f)
    if ext not in (".wav", ".f32"):
        continue
    kind = ext[1:]
    cases.append((stem, f, kind, 1))
    if "quiet" in stem or "loud" in stem:
        cases.append((stem + "_noboost", f, kind, 0))

rows, failed = [], 0
for golden, f, kind, boost in cases:
    data = open(os.path.join(out, f), "rb").read()
    if kind == "wav":
        x, rate, _, _ = ref.decode_wav(data)
        x, _ = ref.resample_16k(x, rate)
    else:
        x = np.frombuffer(data, dtype="<f4").astype(np.float32)
    levels, _ = ref.dmel(x, bool(boost))
    got = levels.tobytes()
    path = os.path.join(out, golden + ".dmel")
    if mode == "generate":
        open(path, "wb").write(got)
    else:
        want = open(path, "rb").read()
        ok = want == got
        failed += not ok
        print(("PASS" if ok else "FAIL") + f" reference still gives golden {golden}")
    rows.append("\t".join([golden, f, kind, str(boost), golden + ".dmel", str(levels.shape[0]), str(len(x)),
                           "%016x" % ref.fnv1a64(x.astype("<f4").tobytes())]))

fb = "%016x" % ref.fnv1a64(ref.mel_filterbank_f32().astype("<f4").tobytes())
win = "%016x" % ref.fnv1a64(ref.hann_f32().astype("<f4").tobytes())
header = ["# tests/fixtures/audio: written by tools/reference/make_audio_goldens.sh; do not edit.",
          f"# numpy {np.__version__}; reference tools/reference/dmel_ref.py",
          f"filterbank_fnv64\t{fb}", f"window_fnv64\t{win}",
          "# golden\tinput\tkind\tboost\tdmel\tframes\tsamples_16k\tfnv64_16k"]
text = "\n".join(header + rows) + "\n"
mpath = os.path.join(out, "manifest.tsv")
if mode == "generate":
    open(mpath, "w").write(text)
    print(f"wrote {len(rows)} goldens and {mpath}")
else:
    old = [l for l in open(mpath).read().splitlines() if not l.startswith("#")]
    new = [l for l in text.splitlines() if not l.startswith("#")]
    ok = old == new
    failed += not ok
    print(("PASS" if ok else "FAIL") + " manifest (frame counts, 16 kHz hashes, filterbank, window) unchanged")
    sys.exit(1 if failed else 0)
PYEOF
