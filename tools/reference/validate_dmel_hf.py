"""Compare dmel_ref.py (numpy) with transformers' own Inkling DMel audio features.

Needs a Python with transformers >= 5.17 (Inkling), torch and numpy, which Debian 12 lacks
(tools/reference/README.md says where it was run). Everything runs on the CPU:

  python3 tools/reference/validate_dmel_hf.py --out DIR [--clips tests/fixtures/audio]

HF has no RMS boost (docs/audio.md), so our side is dmel_ref.dmel(x, boost=False),
the same as `dmel_ref.py IN OUT --no-boost`. Inputs: every raw 16 kHz `.f32` clip in
--clips, the 16 kHz WAVs there (decoded by dmel_ref.decode_wav, no resampling), and a few
signals made here (sine, noise, silence, very loud, very quiet, odd lengths).

The HF side is found by introspection, not assumed: the script lists the modules and
classes of transformers.models.inkling, then computes HF levels along every path it can
run, in this order of preference:
  processor_call     InklingProcessor(audio=[x]) -> audio_input_ids
  process_audio      InklingProcessor._process_audio([x]) -> audio_input_ids
  fe+quantizer       <audio feature class>([x]) -> input_features (log10 mel), then the
                     processor's own quantizer method (_extract_dmel_bins)
  fe_levels          a feature class that returns levels itself (dmel_bins)
The quantizer is always transformers' code; a processor that cannot be built with a real
tokenizer is built by running InklingProcessor.__init__ with a stand-in tokenizer (its
dMel fields are set before the tokenizer is needed). If no HF quantizer can be run at all,
a local nearest-centre quantizer is used and the result is labelled FALLBACK.

Per clip it prints frames (ours / HF), levels compared, differing levels, max |level
diff|, max |log10 mel diff| (HF float features vs our f64 energies) and, for each
mismatch, our and HF's log10 value and the distance to the nearest level boundary. It
writes report.json and the HF Inkling audio sources (hf_inkling_audio_src.txt) to --out.
Exit status: 0 all levels agree, 1 some differ, 2 HF could not be run.
"""

import argparse
import importlib
import inspect
import json
import os
import pkgutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import dmel_ref as ref  # noqa: E402

T0 = time.time()
SR = ref.SAMPLE_RATE
BOUNDARIES = np.array([-6.7 + 0.6 * j for j in range(15)])
INTROSPECTION = []


def log(*a):
    print(*a, flush=True)


def note(line):
    INTROSPECTION.append(line)
    log("  " + line)


def short_tb():
    return traceback.format_exc(limit=6).strip().splitlines()[-6:]


# ---- inputs ---------------------------------------------------------------------------

def load_clips(d):
    clips = []
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        if f.endswith(".f32"):
            x = np.fromfile(p, dtype="<f4").astype(np.float32)
            clips.append(("fixture:" + f, x))
        elif f.endswith(".wav"):
            x, rate, ch, enc = ref.decode_wav(open(p, "rb").read())
            if rate == SR:  # only 16 kHz: no resampler in the comparison
                clips.append((f"fixture:{f} ({ch}ch {enc}, our decode)", x))
    return clips


def synth_clips():
    rng = np.random.default_rng(20261129)
    t = lambda n: np.arange(n, dtype=np.float64) / SR  # noqa: E731
    s = [
        ("synth:sine1k_0.5_2s", 0.5 * np.sin(2 * np.pi * 1000.0 * t(32000))),
        ("synth:sine_sweep_tones_1.5s", 0.2 * np.sin(2 * np.pi * 250.0 * t(24000))
         + 0.1 * np.sin(2 * np.pi * 5123.0 * t(24000))),
        ("synth:noise_0.3_12345", 0.3 * rng.standard_normal(12345)),
        ("synth:silence_1s", np.zeros(16000)),
        ("synth:very_loud_sine_1e4", 1e4 * np.sin(2 * np.pi * 440.0 * t(8000))),
        ("synth:very_loud_noise_300", 300.0 * rng.standard_normal(8001)),
        ("synth:very_quiet_noise_1e-5", 1e-5 * rng.standard_normal(7999)),
        ("synth:dc_0.25_1601", np.full(1601, 0.25)),
        ("synth:impulses_4000", np.where(np.arange(4000) % 397 == 0, 0.9, 0.0)),
        ("synth:two_samples", np.array([0.5, -0.5])),
    ]
    return [(n, np.asarray(x, dtype=np.float64).astype(np.float32)) for n, x in s]


# ---- introspection --------------------------------------------------------------------

def introspect(out_dir):
    import torch
    import transformers
    info = {"python": sys.version.split()[0], "numpy": np.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "transformers_file": transformers.__file__}
    log("== versions: " + json.dumps(info))
    pkg = importlib.import_module("transformers.models.inkling")
    pdir = os.path.dirname(pkg.__file__)
    try:
        names = sorted(m.name for m in pkgutil.iter_modules([pdir]))
    except Exception:
        names = sorted(f[:-3] for f in os.listdir(pdir) if f.endswith(".py"))
    info["inkling_dir"] = pdir
    info["inkling_files"] = sorted(os.listdir(pdir))
    log("== transformers.models.inkling: " + " ".join(info["inkling_files"]))
    classes = {}
    src_dump = []
    for name in names:
        if name.startswith("__"):
            continue
        modname = "transformers.models.inkling." + name
        try:
            mod = importlib.import_module(modname)
        except Exception as e:
            note(f"import {modname} failed: {e!r}")
            continue
        audio_like = any(k in name for k in ("feature", "processing", "audio"))
        if audio_like and "image" not in name:
            try:
                src = inspect.getsource(mod)
                src_dump.append(f"##### {modname} ({mod.__file__})\n{src}\n")
                for i, line in enumerate(src.splitlines(), 1):
                    low = line.lower()
                    if any(k in low for k in ("dmel", "bin_centers", "argmin", "quantiz", "log10",
                                               "clamp_min", "stft", "def ", "class ")):
                        note(f"{name}.py:{i}: {line.strip()[:150]}")
            except Exception as e:
                note(f"getsource {modname} failed: {e!r}")
        for cname, obj in vars(mod).items():
            if not inspect.isclass(obj) or getattr(obj, "__module__", "") != modname:
                continue
            classes[cname] = obj
            bases = [b.__name__ for b in obj.__mro__[1:4]]
            note(f"class {modname}.{cname} bases={bases}")
            for meth in ("__init__", "__call__", "_process_audio", "_extract_dmel_bins"):
                fn = obj.__dict__.get(meth)
                if fn is not None:
                    try:
                        note(f"  {cname}.{meth}{inspect.signature(fn)}")
                    except (TypeError, ValueError):
                        pass
            extra = [m for m in obj.__dict__ if any(k in m.lower() for k in ("dmel", "quant", "mel", "audio", "stft", "extract"))]
            if extra:
                note(f"  {cname} audio-ish members: {extra}")
    for top in ("InklingFeatureExtractor", "InklingProcessor", "InklingAudioProcessor", "InklingAudioProcessorNumpy"):
        note(f"transformers.{top}: {'present' if hasattr(transformers, top) else 'absent'}")
    if out_dir and src_dump:
        with open(os.path.join(out_dir, "hf_inkling_audio_src.txt"), "w") as f:
            f.write("".join(src_dump))
    return info, classes


# ---- the HF side ----------------------------------------------------------------------

def to_np(v):
    try:
        import torch
        if isinstance(v, torch.Tensor):
            return v.detach().cpu().numpy()
    except ImportError:
        pass
    if isinstance(v, list) and v and not np.isscalar(v[0]):
        return np.stack([np.asarray(a) for a in v])
    return np.asarray(v)


def frames_from(arr, mask):
    """arr: [1, T, 80] or [T, 80] or [1, 80, T]. Returns [Tvalid, 80] and the mask count."""
    a = np.asarray(arr)
    if a.ndim == 3:
        a = a[0]
    if a.ndim != 2:
        raise ValueError(f"unexpected feature shape {np.asarray(arr).shape}")
    if a.shape[-1] != ref.MEL_BANDS and a.shape[0] == ref.MEL_BANDS:
        a = a.T
    n = None
    if mask is not None:
        m = np.asarray(mask)
        m = m[0] if m.ndim == 2 else m
        n = int(m.astype(bool).sum())
        a = a[:n]
    return a, n


def call_extractor(fe, x):
    errs = []
    attempts = [
        ("fe([x], sampling_rate=16000, return_tensors='pt')", lambda: fe([x], sampling_rate=SR, return_tensors="pt")),
        ("fe([x], sampling_rate=16000)", lambda: fe([x], sampling_rate=SR)),
        ("fe(audio=[x], sampling_rate=16000, return_tensors='pt')", lambda: fe(audio=[x], sampling_rate=SR, return_tensors="pt")),
        ("fe(x, sampling_rate=16000, return_tensors='pt')", lambda: fe(x, sampling_rate=SR, return_tensors="pt")),
    ]
    for label, fn in attempts:
        try:
            return label, fn(), errs
        except Exception:
            errs.append({"call": label, "error": short_tb()})
    return None, None, errs


class StubTokenizer:
    """Stands in for a tokenizer while InklingProcessor.__init__ sets its dMel fields."""
    model_input_names = ["input_ids", "attention_mask"]
    init_kwargs = {}

    def encode(self, text, add_special_tokens=False):
        return [abs(hash(text)) % 1000]


def tiny_tokenizer():
    from tokenizers import Tokenizer, models
    try:
        from transformers import PreTrainedTokenizerFast as Fast
    except ImportError:
        from transformers import TokenizersBackend as Fast
    toks = ["<unk>", "<|unused_200054|>", "<|unused_200053|>", "<|content_image|>", "<|content_audio_input|>",
            "<|content_audio|>", "<|audio_end|>", "<|audio|>", "<|end_message|>", "<|message_user|>"]
    tk = Tokenizer(models.WordLevel({t: i for i, t in enumerate(toks)}, unk_token="<unk>"))
    tok = Fast(tokenizer_object=tk, unk_token="<unk>", pad_token="<unk>")
    try:
        tok.add_special_tokens({"additional_special_tokens": toks[1:]})
    except Exception:
        tok.add_tokens(toks[1:], special_tokens=True)
    return tok


def make_processor(classes, fe):
    P = classes.get("InklingProcessor")
    if P is None:
        return None, "no InklingProcessor class", []
    errs = []
    ip = None
    for cname in ("InklingImageProcessor", "InklingImageProcessorFast"):
        if cname in classes:
            try:
                ip = classes[cname]()
                break
            except Exception:
                errs.append({"step": f"{cname}()", "error": short_tb()})
    try:
        p = P(feature_extractor=fe, image_processor=ip, tokenizer=tiny_tokenizer())
        return p, "full (tiny in-memory tokenizer)", errs
    except Exception:
        errs.append({"step": "InklingProcessor(fe, image_processor, tiny tokenizer)", "error": short_tb()})
    p = P.__new__(P)
    try:
        P.__init__(p, feature_extractor=fe, image_processor=ip, tokenizer=StubTokenizer())
        how = "full (stub tokenizer)"
    except Exception:
        errs.append({"step": "InklingProcessor.__init__(stub tokenizer) [expected to stop after the dMel fields]",
                     "error": short_tb()})
        how = "partial __init__ (stub tokenizer; dMel fields set by transformers' __init__)"
    try:
        if getattr(p, "feature_extractor", None) is None:
            object.__setattr__(p, "feature_extractor", fe)
    except Exception:
        errs.append({"step": "set feature_extractor", "error": short_tb()})
    return p, how, errs


def quantizer_of(p, classes):
    """The processor's own quantizer method (bound), by name."""
    if p is None:
        return None, None
    cls = type(p)
    for name in ("_extract_dmel_bins", "extract_dmel_bins", "quantize_dmel", "_quantize_dmel"):
        if hasattr(cls, name):
            return getattr(p, name), f"{cls.__name__}.{name}"
    for name in dir(cls):
        if ("dmel" in name.lower() or "quantiz" in name.lower()) and callable(getattr(cls, name, None)):
            return getattr(p, name), f"{cls.__name__}.{name}"
    return None, None


def fallback_quantize(feats):
    mel = np.clip(np.asarray(feats, dtype=np.float64), -7.0, 2.0)
    centers = np.linspace(-7.0, 2.0, 16)
    return np.abs(mel[..., None] - centers).argmin(-1)


class HFSide:
    def __init__(self, classes):
        self.classes = classes
        self.setup_errors = []
        self.extractors = []  # (name, instance)
        for cname, cls in classes.items():
            if ("FeatureExtractor" in cname or "AudioProcessor" in cname) and "Mixin" not in cname:
                try:
                    self.extractors.append((cname, cls()))
                except Exception:
                    self.setup_errors.append({"step": f"{cname}()", "error": short_tb()})
        self.extractors.sort(key=lambda e: (e[0] != "InklingFeatureExtractor", e[0]))
        fe = self.extractors[0][1] if self.extractors else None
        self.processor, self.processor_how, errs = make_processor(classes, fe)
        self.setup_errors += errs
        self.quantize, self.quantizer_name = quantizer_of(self.processor, classes)
        note(f"extractors: {[e[0] for e in self.extractors]}")
        note(f"processor: {self.processor_how}; quantizer: {self.quantizer_name}")
        if self.processor is not None:
            for k in ("num_dmel_bins", "dmel_min_value", "dmel_max_value", "bin_centers"):
                if hasattr(self.processor, k):
                    note(f"processor.{k} = {getattr(self.processor, k)!r}")
        for e in self.setup_errors:
            note("setup: " + e["step"] + " -> " + " | ".join(e["error"][-2:]))

    def run(self, x):
        """Returns {path: {"levels": [T,80] int, "logmel": [T,80] or None, ...}}, errors."""
        import torch
        res, errs = {}, []
        p = self.processor
        if p is not None and "stub" not in self.processor_how and "partial" not in self.processor_how:
            try:
                out = p(audio=[x], sampling_rate=SR, return_tensors="pt")
                keys = list(out.keys())
                key = next((k for k in ("audio_input_ids", "dmel_bins") if k in out), None)
                if key is None:
                    errs.append({"path": "processor_call", "error": [f"no level key in {keys}"]})
                else:
                    mask = out.get("audio_input_ids_mask", out.get("input_features_mask"))
                    lv, n = frames_from(to_np(out[key]), None if mask is None else to_np(mask))
                    res["processor_call"] = {"levels": lv, "mask_frames": n, "keys": keys}
            except Exception:
                errs.append({"path": "processor_call", "error": short_tb()})
        if p is not None and hasattr(type(p), "_process_audio"):
            try:
                out = p._process_audio([x], sampling_rate=SR, return_tensors="pt")
                d = out[0] if isinstance(out, tuple) else out
                mask = d.get("audio_input_ids_mask")
                lv, n = frames_from(to_np(d["audio_input_ids"]), None if mask is None else to_np(mask))
                res["process_audio"] = {"levels": lv, "mask_frames": n, "keys": list(d.keys())}
            except Exception:
                errs.append({"path": "process_audio", "error": short_tb()})
        for cname, fe in self.extractors:
            label, out, e = call_extractor(fe, x)
            errs += [dict(path=f"{cname} call", **v) for v in e]
            if out is None:
                continue
            keys = list(out.keys())
            if "input_features" in out:
                mask = out.get("input_features_mask", out.get("attention_mask"))
                feats_t = out["input_features"]
                feats, n = frames_from(to_np(feats_t), None if mask is None else to_np(mask))
                entry = {"logmel": feats.astype(np.float64), "mask_frames": n, "keys": keys, "call": label}
                if self.quantize is not None:
                    try:
                        ft = feats_t if isinstance(feats_t, torch.Tensor) else torch.as_tensor(to_np(feats_t))
                        if ft.ndim == 2:
                            ft = ft[None]
                        q = self.quantize(ft)
                        entry["levels"], _ = frames_from(to_np(q), None if mask is None else to_np(mask))
                        entry["quantizer"] = self.quantizer_name
                        res[f"fe+quantizer:{cname}"] = entry
                    except Exception:
                        errs.append({"path": f"{cname} + {self.quantizer_name}", "error": short_tb()})
                if f"fe+quantizer:{cname}" not in res:
                    entry = dict(entry, levels=fallback_quantize(feats), quantizer="FALLBACK-local-nearest-centre")
                    res[f"FALLBACK:{cname}"] = entry
            elif "dmel_bins" in out or "audio_input_ids" in out:
                key = "dmel_bins" if "dmel_bins" in out else "audio_input_ids"
                mask = out.get("attention_mask", out.get("input_features_mask"))
                lv, n = frames_from(to_np(out[key]), None if mask is None else to_np(mask))
                res[f"fe_levels:{cname}"] = {"levels": lv, "mask_frames": n, "keys": keys, "call": label,
                                             "num_audio_tokens": to_np(out.get("num_audio_tokens", [])).tolist()}
            else:
                errs.append({"path": cname, "error": [f"no known key in {keys}"]})
        return res, errs


# ---- comparison -----------------------------------------------------------------------

def compare(ours, our_log, hf):
    lv = np.rint(np.asarray(hf["levels"], dtype=np.float64)).astype(np.int64)
    f = min(len(ours), len(lv))
    a, b = ours[:f].astype(np.int64), lv[:f]
    diff = a != b
    r = {"frames_ours": int(len(ours)), "frames_hf": int(len(lv)), "mask_frames": hf.get("mask_frames"),
         "levels_compared": int(a.size), "mismatches": int(diff.sum()),
         "max_abs_level_diff": int(np.abs(a - b).max()) if a.size else 0,
         "hf_level_range": [int(lv.min()), int(lv.max())] if lv.size else None}
    hl = hf.get("logmel")
    if hl is not None:
        hl = np.asarray(hl, dtype=np.float64)[:f]
        ol = our_log[:f]
        r["max_abs_log10_diff"] = float(np.abs(hl - ol).max()) if hl.size else 0.0
        r["max_abs_log10_diff_clamped"] = float(np.abs(np.clip(hl, -7, 2) - np.clip(ol, -7, 2)).max()) if hl.size else 0.0
    where = []
    for t, m in zip(*np.nonzero(diff)):
        L = float(our_log[t, m])
        j = int(np.abs(BOUNDARIES - L).argmin())
        w = {"frame": int(t), "band": int(m), "ours": int(a[t, m]), "hf": int(b[t, m]), "our_log10": L,
             "nearest_boundary": round(float(BOUNDARIES[j]), 6), "our_dist_to_boundary": L - float(BOUNDARIES[j]),
             "frame_peak_log10": float(our_log[t].max())}
        if hl is not None:
            w["hf_log10"] = float(hl[t, m])
        where.append(w)
        if len(where) >= 25:
            break
    r["mismatch_examples"] = where
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--clips", default=os.path.join(HERE, "..", "..", "tests", "fixtures", "audio"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    report = {"clips": [], "errors": []}

    bad = ref.check_thresholds()
    log(f"dmel_ref thresholds: {'ok' if not bad else bad}")
    clips = load_clips(a.clips) + synth_clips()
    log(f"{len(clips)} clips")

    # goldens: our no-boost output on this machine's numpy vs the committed .dmel files
    golden = {}
    for line in open(os.path.join(a.clips, "manifest.tsv")):
        if line.startswith("#") or line.count("\t") < 7:
            continue
        g, inp, kind, boost, dm = line.split("\t")[:5]
        golden.setdefault(inp, []).append((g, int(boost), dm))

    try:
        info, classes = introspect(a.out)
        report["versions"] = info
        hf = HFSide(classes)
        report["hf_setup"] = {"extractors": [e[0] for e in hf.extractors], "processor": hf.processor_how,
                              "quantizer": hf.quantizer_name, "setup_errors": hf.setup_errors}
    except Exception:
        report["errors"].append({"step": "introspection/setup", "error": traceback.format_exc()})
        log(traceback.format_exc())
        hf = None
    report["introspection"] = INTROSPECTION

    # filterbank and window, where an extractor holds them
    if hf is not None:
        ours_fb, ours_win = ref.mel_filterbank_f32(), ref.hann_f32()
        for cname, fe in hf.extractors:
            for attr, val in vars(fe).items():
                try:
                    v = to_np(val)
                except Exception:
                    continue
                if not isinstance(v, np.ndarray) or v.dtype.kind != "f":
                    continue
                if v.size == ours_fb.size:
                    v2 = v.T if v.shape == ours_fb.shape[::-1] else v
                    if v2.shape == ours_fb.shape:
                        d = np.abs(v2.astype(np.float64) - ours_fb)
                        r = {"what": f"{cname}.{attr} vs mel_filterbank_f32", "max_abs_diff": float(d.max()),
                             "bitwise_equal": int((v2.astype(np.float32) == ours_fb).sum()), "of": int(ours_fb.size),
                             "dtype": str(v.dtype)}
                        report.setdefault("constants", []).append(r)
                        log("  " + json.dumps(r))
                elif v.size == ours_win.size:
                    d = np.abs(v.reshape(-1).astype(np.float64) - ours_win)
                    r = {"what": f"{cname}.{attr} vs hann_f32", "max_abs_diff": float(d.max()),
                         "bitwise_equal": int((v.reshape(-1).astype(np.float32) == ours_win).sum()),
                         "of": int(ours_win.size), "dtype": str(v.dtype)}
                    report.setdefault("constants", []).append(r)
                    log("  " + json.dumps(r))

    log(f"\n{'clip':58s} {'n':>6s} {'F':>4s} {'F_hf':>4s} {'levels':>6s} {'diff':>5s} {'maxd':>4s} {'max|dlog10|':>11s} golden")
    log("  (diff: levels that differ on the first HF path that ran; max|dlog10|: HF log10 mel vs ours,"
        " both clamped to [-7, 2]; golden: our no-boost output vs the committed .dmel)")
    totals = {}
    for name, x in clips:
        ours, extra = ref.dmel(x, boost=False)
        with np.errstate(divide="ignore"):
            our_log = np.log10(np.maximum(extra["energy"], 1e-10))
        rms, s = ref.boost_scale(x)
        c = {"clip": name, "samples": int(len(x)), "rms": rms, "boost_would_trigger": s != 1.0,
             "frames_ours": int(ours.shape[0])}
        fname = name.split(":", 1)[1].split(" ")[0] if name.startswith("fixture:") else None
        gch = []
        for g, boost, dm in golden.get(fname, []):
            if boost == 0 or s == 1.0:  # goldens that the no-boost output must equal
                want = open(os.path.join(a.clips, dm), "rb").read()
                gch.append({"golden": dm, "equal": want == ours.tobytes()})
        c["goldens"] = gch
        gtxt = ",".join(("ok" if g["equal"] else "DIFF") for g in gch) or "-"
        c["hf"] = {}
        if hf is not None:
            try:
                res, errs = hf.run(x)
            except Exception:
                res, errs = {}, [{"path": "run", "error": traceback.format_exc()}]
            c["hf_errors"] = errs
            paths = list(res)
            for path in paths:
                c["hf"][path] = compare(ours, our_log, res[path])
                if "call" in res[path]:
                    c["hf"][path]["call"] = res[path]["call"]
                t = totals.setdefault(path, {"clips": 0, "frames": 0, "levels": 0, "mismatches": 0,
                                             "frame_count_mismatch_clips": 0, "max_abs_level_diff": 0,
                                             "max_abs_log10_diff_clamped": 0.0})
                r = c["hf"][path]
                t["clips"] += 1
                t["frames"] += min(r["frames_ours"], r["frames_hf"])
                t["levels"] += r["levels_compared"]
                t["mismatches"] += r["mismatches"]
                t["frame_count_mismatch_clips"] += r["frames_ours"] != r["frames_hf"]
                t["max_abs_level_diff"] = max(t["max_abs_level_diff"], r["max_abs_level_diff"])
                t["max_abs_log10_diff_clamped"] = max(t["max_abs_log10_diff_clamped"],
                                                      r.get("max_abs_log10_diff_clamped", 0.0))
            # agreement between HF paths
            if len(paths) > 1:
                base = np.asarray(res[paths[0]]["levels"])
                c["hf_paths_agree"] = all(np.array_equal(base, np.asarray(res[p]["levels"])) for p in paths[1:])
            main_path = paths[0] if paths else None
            if main_path:
                r = c["hf"][main_path]
                with_log = [q for q in paths if "max_abs_log10_diff_clamped" in c["hf"][q]]
                dl = c["hf"][with_log[0]]["max_abs_log10_diff_clamped"] if with_log else None
                ex = c["hf"][with_log[0]] if with_log else r
                log(f"{name[:58]:58s} {len(x):6d} {r['frames_ours']:4d} {r['frames_hf']:4d} {r['levels_compared']:6d} "
                    f"{r['mismatches']:5d} {r['max_abs_level_diff']:4d} {('%.3g' % dl) if dl is not None else '-':>11s} {gtxt}"
                    + ("" if c.get("hf_paths_agree", True) else "  (HF paths disagree)"))
                for w in ex["mismatch_examples"][:5]:
                    log(f"      mismatch {json.dumps(w)}")
            else:
                log(f"{name[:58]:58s} {len(x):6d} {ours.shape[0]:4d}  HF: no path ran; errors: "
                    + " || ".join(" | ".join(e["error"][-1:]) for e in errs[:4]))
        report["clips"].append(c)

    report["totals"] = totals
    report["elapsed_s"] = round(time.time() - T0, 1)
    log("\n== summary per HF path")
    for path, t in totals.items():
        log(f"{path}: {t['clips']} clips, {t['frames']} frames, {t['levels']} levels compared, "
            f"{t['mismatches']} differ, max |level diff| {t['max_abs_level_diff']}, "
            f"clips with other frame counts {t['frame_count_mismatch_clips']}, "
            f"max |log10 diff| (clamped) {t['max_abs_log10_diff_clamped']:.3g}")
    goldens_all = [g for c in report["clips"] for g in c["goldens"]]
    log(f"goldens reproduced on this machine (numpy {np.__version__}): "
        f"{sum(g['equal'] for g in goldens_all)}/{len(goldens_all)}")
    log(f"elapsed {report['elapsed_s']} s")
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    if not totals:
        return 2
    real = {p: t for p, t in totals.items() if not p.startswith("FALLBACK")}
    if not real:
        return 2
    return 0 if all(t["mismatches"] == 0 and t["frame_count_mismatch_clips"] == 0 for t in real.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
