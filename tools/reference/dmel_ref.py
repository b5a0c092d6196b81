"""dmel_ref.py: the DMel audio DSP written in numpy. It is the oracle for protocol/audio/.

Written from docs/audio.md ("The DSP, exactly"). It takes 16 kHz mono float and
gives u8 levels [frames][80], one byte per (frame, band).

    /usr/bin/python3 tools/reference/dmel_ref.py IN.f32 OUT.dmel [--no-boost] [--info]
    /usr/bin/python3 tools/reference/dmel_ref.py --wav IN.wav OUT.dmel [--dump-16k F.f32] …

IN.f32 is raw little-endian float32 at 16 kHz. `--wav` decodes a RIFF/WAVE file first
(PCM 8/16/24/32, float 32/64, extensible). It averages the channels in f32 and resamples
any other rate to 16 kHz through libsamplerate (ctypes, SRC_SINC_BEST_QUALITY unless
--quality says otherwise). Then it pads or trims to ceil(n*16000/rate) samples. `--info`
prints one JSON line: frames, sample count, FNV-1a-64 of the 16 kHz samples, rms, boost.

The precision choices below are the normative ones. The C++ port matches them bit for bit.
- window: periodic Hann in f64 (libm cos), cast to f32; frame*window is an f32 product.
- spectrum: rfft in f64, P = re^2 + im^2, P *= s^2 (RMS boost), mag = f32(sqrt(max(P, 1e-10))).
- filterbank: Slaney in f64 (libm log/exp, explicit formulas), cast to f32.
- mel energy: E = sum over k ascending of f64(w) * f64(mag), in f64. Each product of two
  f32 values is exact in f64, so the sum has one fixed order and one meaning.
- levels: q = #{j : log10(E) > -6.7 + 0.6 j}, in exact arithmetic. That is the
  nearest-centre rule with ties going low. It is evaluated as E >= U_j, where U_j is the
  smallest double above 10^(-6.7 + 0.6 j) (constants below, checked by --self-check). No
  log10 is taken, so the levels do not depend on any libm.
`--emulate colibri` instead follows the f32 arithmetic of colibri's gateway
(c/openai_server.py `dmel_encode`: f32 matmul, f32 log10, ceil(v - 0.5)). It is for
comparisons only.
"""
import argparse
import ctypes
import ctypes.util
import json
import math
import struct
import sys

import numpy as np

SAMPLE_RATE = 16000
HOP = 800
WINDOW = 1600
BINS = WINDOW // 2 + 1  # 801
MEL_BANDS = 80
LEVELS = 16
RMS_TARGET = 0.01
POWER_FLOOR = 1e-10

# U_j: the smallest double greater than 10^(-6.7 + 0.6 j), for j = 0..14.
LEVEL_THRESHOLDS = [float.fromhex(h) for h in (
    "0x1.ac7ab4ae8f68cp-23", "0x1.aa73a42bd409fp-21", "0x1.a86f0875fcf95p-19",
    "0x1.a66cde934de84p-17", "0x1.a46d238da54e8p-15", "0x1.a26fd472780c5p-13",
    "0x1.a074ee52cd11bp-11", "0x1.9e7c6e43390b7p-9", "0x1.9c86515bda14dp-7",
    "0x1.9a9294b8536ebp-5", "0x1.98a13577c93c0p-3", "0x1.96b230bcdc435p-1",
    "0x1.94c583ada5b53p+1", "0x1.92db2b73b2f85p+3", "0x1.90f3253c017a1p+5")]


class RefError(Exception):
    pass


def check_thresholds():
    """Recomputes U_j at 80 digits. Returns the list of mismatching j."""
    from decimal import Decimal, getcontext
    getcontext().prec = 80
    bad = []
    for j, u in enumerate(LEVEL_THRESHOLDS):
        exact = Decimal(10) ** (Decimal(6 * j - 67) / Decimal(10))
        below = math.nextafter(u, -math.inf)
        if not (Decimal(u) > exact and Decimal(below) < exact):
            bad.append(j)
    return bad


def hann_f32():
    return np.array([0.5 - 0.5 * math.cos(2.0 * math.pi * j / WINDOW) for j in range(WINDOW)],
                    dtype=np.float64).astype(np.float32)


LOGSTEP = math.log(6.4) / 27.0
F_SP = 200.0 / 3.0


def hz_to_mel(hz):
    return hz / F_SP if hz < 1000.0 else 15.0 + math.log(hz / 1000.0) / LOGSTEP


def mel_to_hz(mel):
    return F_SP * mel if mel < 15.0 else 1000.0 * math.exp(LOGSTEP * (mel - 15.0))


def mel_filterbank_f32():
    """[80, 801] Slaney filters (area-normalized, 0..8000 Hz), built in f64 and cast to f32."""
    mel_max = hz_to_mel(8000.0)
    step = mel_max / (MEL_BANDS + 1)
    edges = [mel_to_hz(i * step) for i in range(MEL_BANDS + 1)] + [mel_to_hz(mel_max)]
    w = np.zeros((MEL_BANDS, BINS), dtype=np.float64)
    for m in range(MEL_BANDS):
        lo, c, hi = edges[m], edges[m + 1], edges[m + 2]
        norm = 2.0 / (hi - lo)
        for k in range(BINS):
            f = 10.0 * k
            t = min((f - lo) / (c - lo), (hi - f) / (hi - c))
            w[m, k] = max(0.0, t) * norm
    return w.astype(np.float32)


def boost_scale(x):
    """The boost's s (docs/audio.md): 0.01/rms if 0 < rms < 0.01, else 1; rms in f64."""
    x64 = x.astype(np.float64)
    rms = math.sqrt(float(np.sum(x64 * x64)) / len(x))
    return rms, (RMS_TARGET / rms if 0.0 < rms < RMS_TARGET else 1.0)


def frames_of(x):
    """[F, 1600] f32: frame i covers samples [800 i - 800, 800 i + 800), zeros outside."""
    n = len(x)
    f = (n + HOP - 1) // HOP
    buf = np.zeros(HOP + HOP * f + HOP, dtype=np.float32)
    buf[HOP:HOP + n] = x
    idx = HOP * np.arange(f)[:, None] + np.arange(WINDOW)[None, :]
    return buf[idx]


def magnitudes(x, boost):
    frames = frames_of(x) * hann_f32()  # f32 product
    spec = np.fft.rfft(frames.astype(np.float64), n=WINDOW, axis=1)
    power = spec.real * spec.real + spec.imag * spec.imag
    rms, s = boost_scale(x) if boost else (None, 1.0)
    if s != 1.0:
        power = power * (s * s)
    with np.errstate(over="ignore"):
        mag = np.sqrt(np.maximum(power, POWER_FLOOR)).astype(np.float32)
    return mag, rms, s


def dmel(x, boost=True):
    """x: 1-D float32 at 16 kHz, len >= 1, finite. Returns (u8 [F, 80], info)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 1 or len(x) == 0:
        raise RefError("audio clip is empty")
    if not np.all(np.isfinite(x)):
        raise RefError(f"sample {int(np.argmin(np.isfinite(x)))} is not finite")
    mag, rms, s = magnitudes(x, boost)
    w64 = mel_filterbank_f32().astype(np.float64)
    mag64 = mag.astype(np.float64)
    energy = np.zeros((mag.shape[0], MEL_BANDS), dtype=np.float64)
    for k in range(BINS):  # fixed order: ascending bins
        energy += mag64[:, k:k + 1] * w64[None, :, k]
    levels = np.searchsorted(np.array(LEVEL_THRESHOLDS), energy, side="right")
    return levels.astype(np.uint8), {"rms": rms, "boost": s, "energy": energy}


def dmel_colibri_f32(x, boost=True):
    """colibri's f32 arithmetic (c/openai_server.py `dmel_encode`; comparison only)."""
    x = np.asarray(x, dtype=np.float32)
    mag, _, _ = magnitudes(x, boost)
    e = mag @ mel_filterbank_f32().T
    lg = np.log10(np.maximum(e, np.float32(POWER_FLOOR)))
    norm = np.clip((np.clip(lg, np.float32(-7), np.float32(2)) + np.float32(7)) / np.float32(9), 0, 1)
    q = np.clip(np.ceil(norm * np.float32(15) - np.float32(0.5)), 0, 15)
    return q.astype(np.uint8)


# ---- WAV decoding and resampling (docs/audio.md) -------------------------------------

EXT_GUID_TAIL = bytes.fromhex("000010008000 00aa00389b71".replace(" ", ""))


def decode_wav(data):
    """Returns (mono f32, sample rate, channels, encoding name)."""
    if len(data) < 12 or data[0:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise RefError("not a RIFF/WAVE file")
    (riff_size,) = struct.unpack_from("<I", data, 4)
    end = len(data) if riff_size in (0, 0xFFFFFFFF) else 8 + riff_size
    if end > len(data):
        raise RefError("truncated RIFF")
    pos, fmt, body = 12, None, None
    while pos + 8 <= end:
        cid = data[pos:pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        start = pos + 8
        if cid == b"data" and size == 0xFFFFFFFF:
            size = end - start
        if start + size > end:
            raise RefError(f"truncated {cid!r} chunk")
        if cid == b"fmt ":
            fmt = data[start:start + size]
        elif cid == b"data":
            body = data[start:start + size]
        pos = start + size + (size & 1)
    if fmt is None or body is None:
        raise RefError("missing fmt or data chunk")
    tag, ch, rate, _, align, bits = struct.unpack_from("<HHIIHH", fmt, 0)
    if tag == 0xFFFE:
        if len(fmt) < 40 or fmt[28:40] != EXT_GUID_TAIL:
            raise RefError("bad extensible fmt")
        (tag,) = struct.unpack_from("<I", fmt, 24)
    if ch == 0 or rate == 0 or align != ch * (bits // 8):
        raise RefError("bad fmt fields")
    n = len(body) // align
    raw = np.frombuffer(body[:n * align], dtype=np.uint8)
    if tag == 1 and bits == 8:
        s = (raw.astype(np.float32) - np.float32(128)) / np.float32(128)
        name = "pcm_u8"
    elif tag == 1 and bits == 16:
        s = raw.view("<i2").astype(np.float32) / np.float32(32768)
        name = "pcm_s16"
    elif tag == 1 and bits == 24:
        b = raw.reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        v = np.where(v >= 1 << 23, v - (1 << 24), v)
        s = v.astype(np.float32) / np.float32(1 << 23)
        name = "pcm_s24"
    elif tag == 1 and bits == 32:
        s = raw.view("<i4").astype(np.float32) / np.float32(2.0 ** 31)
        name = "pcm_s32"
    elif tag == 3 and bits == 32:
        s = raw.view("<f4").astype(np.float32)
        name = "float32"
    elif tag == 3 and bits == 64:
        s = raw.view("<f8").astype(np.float32)
        name = "float64"
    else:
        raise RefError(f"unsupported format tag {tag} / {bits} bits")
    s = s.reshape(n, ch)
    acc = s[:, 0].copy()
    for c in range(1, ch):  # sequential f32 sum, then one division
        acc = acc + s[:, c]
    mono = acc if ch == 1 else acc / np.float32(ch)
    return mono.astype(np.float32), rate, ch, name


class _SrcData(ctypes.Structure):
    _fields_ = [("data_in", ctypes.POINTER(ctypes.c_float)), ("data_out", ctypes.POINTER(ctypes.c_float)),
                ("input_frames", ctypes.c_long), ("output_frames", ctypes.c_long),
                ("input_frames_used", ctypes.c_long), ("output_frames_gen", ctypes.c_long),
                ("end_of_input", ctypes.c_int), ("src_ratio", ctypes.c_double)]


QUALITIES = {"best": 0, "medium": 1, "fastest": 2, "zoh": 3, "linear": 4}
OUTPUT_MARGIN = 64  # spare output capacity beyond the target length (the C++ uses the same)


def resample_16k(x, rate, quality="best"):
    """libsamplerate src_simple, then pad with zeros or trim to ceil(n*16000/rate)."""
    if rate == SAMPLE_RATE:
        return x, None
    lib = ctypes.CDLL(ctypes.util.find_library("samplerate") or "libsamplerate.so.0")
    lib.src_simple.argtypes = [ctypes.POINTER(_SrcData), ctypes.c_int, ctypes.c_int]
    lib.src_strerror.restype = ctypes.c_char_p
    n = len(x)
    target = -(-n * SAMPLE_RATE // rate)
    src = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(target + OUTPUT_MARGIN, dtype=np.float32)
    d = _SrcData()
    d.data_in = src.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    d.data_out = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    d.input_frames, d.output_frames = n, len(out)
    d.src_ratio = SAMPLE_RATE / rate
    err = lib.src_simple(ctypes.byref(d), QUALITIES[quality], 1)
    if err:
        raise RefError("libsamplerate: " + lib.src_strerror(err).decode())
    gen = d.output_frames_gen
    y = np.zeros(target, dtype=np.float32)
    y[:min(gen, target)] = out[:min(gen, target)]
    return y, gen


def fnv1a64(b):
    """FNV-1a-64 over bytes. Pure Python is fast enough for a few seconds of audio."""
    h = 0xcbf29ce484222325
    for byte in bytes(b):
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", nargs="?")
    ap.add_argument("output", nargs="?")
    ap.add_argument("--wav", action="store_true", help="input is a WAV file (any rate, any channels)")
    ap.add_argument("--no-boost", action="store_true", help="skip the RMS boost for quiet clips (docs/audio.md)")
    ap.add_argument("--quality", choices=sorted(QUALITIES), default="best")
    ap.add_argument("--dump-16k", metavar="F32", help="also write the 16 kHz mono float32 input")
    ap.add_argument("--emulate", choices=["colibri"], help="f32 arithmetic as colibri (comparison only)")
    ap.add_argument("--info", action="store_true", help="print a JSON summary line")
    ap.add_argument("--self-check", action="store_true", help="verify the level thresholds and exit")
    a = ap.parse_args(argv)
    if a.self_check:
        bad = check_thresholds()
        print("thresholds ok" if not bad else f"thresholds wrong at j={bad}")
        return 1 if bad else 0
    if not a.input or not a.output:
        ap.error("IN and OUT are required")
    try:
        data = open(a.input, "rb").read()
        info = {}
        if a.wav:
            x, rate, ch, name = decode_wav(data)
            info.update(sample_rate=rate, channels=ch, encoding=name, decoded_samples=len(x))
            x, gen = resample_16k(x, rate, a.quality)
            if gen is not None:
                info["src_generated"] = gen
        else:
            if len(data) % 4:
                raise RefError(f"{len(data)} bytes is not a whole number of float32 samples")
            x = np.frombuffer(data, dtype="<f4").astype(np.float32)
        if a.dump_16k:
            x.astype("<f4").tofile(a.dump_16k)
        if a.emulate == "colibri":
            levels, extra = dmel_colibri_f32(x, not a.no_boost), {}
        else:
            levels, extra = dmel(x, not a.no_boost)
        levels.tofile(a.output)
        if a.info:
            info.update(samples_16k=len(x), frames=int(levels.shape[0]),
                        fnv64_16k="%016x" % fnv1a64(x.astype("<f4").tobytes()),
                        rms=extra.get("rms"), boost=extra.get("boost"))
            print(json.dumps(info))
    except (RefError, OSError) as e:
        print(f"dmel_ref: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
