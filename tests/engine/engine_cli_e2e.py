#!/usr/bin/env python3
"""engine_cli_e2e.py [BUILD]: the documented commands and flags of `inkling` that other
suites do not reach (docs/engine.md, docs/configuration.md), each against an oracle the
engine did not produce:

  - `inkling info`: the config as understood, against make_tiny's geometry tables (layer
    kinds from its own schedule rules, precedence included)
  - `run --prompt` (plain and --chat): the prompt ids of the python BPE trainer
    (tools/train-tiny/bpe.py) on the trained demo model and of the npm tiktoken package on
    the o200k-based one; the chat turn of the trained model gives the reference's greedy
    reply (tests/fixtures/demo, from tools/reference)
  - `run --effort`: the effort line (docs/model.md, "Thinking effort") in the prompt
  - `run --audio`: the audio fixture's reference tokens and logits (tests/fixtures/golden);
    with --prompt, the placeholders of the rendered chat, one per frame
  - `--isa`: every ISA the CPU has (/proc/cpuinfo) gives the reference's tokens and logits
    within 1e-4, reported as chosen; one it lacks is an error
  - `serve --prefill-chunk N`: the reference's tokens for every N, and a prompt of P tokens
    takes ceil(P / N) rounds (a request decoding beside it gets one token a round)
  - `--load-weights map|copy|auto`: each gives the reference's tokens and logits, all three the
    same bits; bench reports the mode in force; an unknown mode is an error naming the flag
  - `bench --kernels --kernel-shape ROWSxCOLS`: the report is of that shape (each format's
    matrix bytes from the shape and dtype, enough copies for --kernel-mb, no ggml figures off
    the default shape, the one-core in-L2 rate of every format beside its ratio); a malformed
    shape is an error naming the flag (timings not checked)

PASS/FAIL lines; exit 0 when all pass.
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tools", "make-tiny"))
sys.path.insert(0, os.path.join(ROOT, "tools", "train-tiny"))
import bpe  # noqa: E402
import make_tiny  # noqa: E402
from lib import Checks, Engine, wire  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
INKLING = os.path.join(build, "inkling")
FIXTURES = os.path.join(build, "fixtures")
DEMO = os.path.join(ROOT, "models", "inkling-demo")          # trained, its own 4096-id BPE
O200K_DEMO = os.path.join(build, "demo-model")               # random, o200k ids, audio tower
GOLDEN = os.path.join(ROOT, "tests", "fixtures", "golden")
checks = Checks("engine cli e2e")
report = checks.report


def inkling(*args, check=True):
    p = subprocess.run([INKLING, *args], capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        raise RuntimeError(f"inkling {' '.join(args)}: exit {p.returncode}: {p.stderr[-600:]}")
    return p


def run_json(model, *args):
    return json.loads(inkling("run", "--model", model, "--json", "--threads", "2", *args).stdout)


def golden(name):
    g = json.load(open(os.path.join(GOLDEN, name + ".json")))
    if isinstance(g["last_logits"], str):
        g["last_logits"] = json.loads(g["last_logits"])
    return g


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")


def tiktoken(texts):
    """The npm tiktoken package's ids for each text, with the o200k model's added tokens."""
    p = subprocess.run(["node", os.path.join(ROOT, "tests", "engine", "tiktoken_encode.mjs"),
                        os.path.join(O200K_DEMO, "tokenizer.json")],
                       input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True, check=True)
    return [json.loads(line) for line in p.stdout.splitlines()]


# The TMLv0 chat (docs/model.md, "TMLv0 prompts"), written out: the effort line
# as a system message before the first non-system one; at effort 0 the model's turn opens
# in content mode.
def chat_prompt(user, effort="0", audio_frames=0):
    text = f"<|message_system|><|content_text|>Thinking effort level: {effort}<|end_message|><|message_user|>"
    text += f"<|content_text|>{user}<|end_message|>"
    if audio_frames:
        text += "<|message_user|><|content_audio_input|>" + "<|audio|>" * audio_frames + "<|audio_end|><|end_message|>"
    return text + "<|message_model|>" + ("<|content_text|>" if effort == "0" else "")


# -- inkling info --------------------------------------------------------------------------
for name, geometry in (("mixed-hf-f32", "mixed"), ("ring-release-bf16", "ring"), ("dense-hf-f32", "dense"),
                       ("audio-hf-f32", "audio")):
    g = make_tiny.GEOMETRIES[geometry]
    local, sparse = make_tiny.layer_kinds(g)
    got = json.loads(inkling("info", "--model", os.path.join(FIXTURES, name)).stdout)
    want = {
        "hidden": g["D"], "layers": g["L"], "vocab": g["vocab"], "unpadded_vocab": g["unpad"], "d_rel": g["d_rel"],
        "conv_kernel": g["conv_k"], "dense_width": g["dense_inter"], "mup": g["mup"], "eos": g["eos"],
        "global_attention": {"heads": g["heads"], "kv_heads": g["kv"], "head_dim": g["hd"],
                             "rel_extent": g["rel_extent"]},
        "local_attention": {"heads": g["swa_heads"], "kv_heads": g["swa_kv"], "head_dim": g["swa_hd"],
                            "window": g["window"]},
        "moe": {"experts": g["E"], "top_k": g["topk"], "shared": g["ns"], "expert_width": g["moe_inter"],
                "route_scale": g["route_scale"]},
        "layer_kinds": " ".join(("L" if lo else "G") + ("m" if sp else "d") for lo, sp in zip(local, sparse)),
        "audio_tower": g["audio"] is not None, "tokenizer": False,
        "layout": "release" if "release" in name else "transformers",
    }
    if g["n_floor"] is not None:
        want["tau"] = {"n_floor": g["n_floor"], "alpha": g["alpha"]}
    wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    if g["eos"] is None:  # no eos in the config: info says what the engine uses, not checked
        wrong.pop("eos", None)
    files = sum(os.path.getsize(os.path.join(FIXTURES, name, f)) for f in os.listdir(os.path.join(FIXTURES, name))
                if f.endswith(".safetensors"))
    report(f"info {name}: the config as make_tiny wrote it ({got.get('layer_kinds')})",
           not wrong and 0 < got.get("matrix_bytes", 0) <= got.get("file_bytes", 0) <= files, (wrong, got))
p = inkling("info", "--model", os.path.join(FIXTURES, "mixed-hf-f32"), "--isa", "scalar")
report("info --isa scalar reports the ISA chosen", json.loads(p.stdout).get("isa") == "scalar", p.stdout[-300:])
p = inkling("info", "--model", os.path.join(FIXTURES, "nonexistent"), check=False)
report("info on a folder without a model: exit 1 and a message naming it",
       p.returncode == 1 and "nonexistent" in p.stderr, (p.returncode, p.stderr))

# -- run --prompt, --chat, --effort on the trained demo model --------------------------------
demo_golden = json.load(open(os.path.join(ROOT, "tests", "fixtures", "demo", "inkling-demo.json")))
demo_tok = bpe.Tokenizer.load(os.path.join(DEMO, "tokenizer.json"))
text = "Once upon a time, the cat said"
r = run_json(DEMO, "--prompt", text, "-n", "8")
report("run --prompt: the prompt ids of the python BPE trainer's tokenizer",
       r["prompt_ids"] == demo_tok.encode(text) and len(r["tokens"]) == 8, (r["prompt_ids"], demo_tok.encode(text)))
plain = inkling("run", "--model", DEMO, "--prompt", text, "-n", "8", "--threads", "2").stdout
report("run --prompt without --json prints the text of the tokens", plain == r["text"] + "\n", (plain, r["text"]))
r = run_json(DEMO, "--prompt", demo_golden["prompt_text"], "--chat", "-n", "64")
report("run --chat: the TMLv0 chat prompt of the reference golden, and the reference's greedy reply",
       r["prompt_ids"] == demo_golden["prompt_ids"] and r["tokens"] == demo_golden["tokens"],
       (r["prompt_ids"], r["tokens"], demo_golden["tokens"]))
report("run --chat: the spec's template tokenized by the BPE trainer is the same prompt",
       demo_tok.encode(chat_prompt(demo_golden["prompt_text"])) == demo_golden["prompt_ids"])
for level, value in (("high", "0.9"), ("minimal", "0.1"), ("max", "0.99")):
    r = run_json(DEMO, "--prompt", demo_golden["prompt_text"], "--chat", "--effort", level, "-n", "4")
    want = demo_tok.encode(chat_prompt(demo_golden["prompt_text"], value))
    report(f"run --chat --effort {level}: 'Thinking effort level: {value}', no forced content mode",
           r["prompt_ids"] == want, (demo_tok.decode(r["prompt_ids"]), demo_tok.decode(want)))
p = inkling("run", "--model", DEMO, "--prompt", "x", "--chat", "--effort", "extreme", check=False)
report("run --effort with an unknown level: exit 1 naming it", p.returncode == 1 and "extreme" in p.stderr, p.stderr)
p = inkling("run", "--model", os.path.join(FIXTURES, "base-hf-f32"), "--prompt", "x", check=False)
report("run --prompt on a model without tokenizer.json: exit 1, says to give --ids",
       p.returncode == 1 and "--ids" in p.stderr, p.stderr)

# -- run --audio ---------------------------------------------------------------------------
ag = golden("audio-hf-f32")
audio_fx = os.path.join(FIXTURES, "audio-hf-f32")
r = run_json(audio_fx, "--ids", ",".join(map(str, ag["prompt_ids"])), "--audio", os.path.join(audio_fx, "sample.dmel"),
             "-n", str(ag["generate"]))
d = max_diff(r["last_logits"], ag["last_logits"])
report(f"run --ids --audio: the reference's tokens, prompt argmax and last logits (max |diff| {d:.1e} <= 1e-4)",
       r["tokens"] == ag["tokens"] and r["prompt_argmax"] == ag["prompt_argmax"] and d <= 1e-4,
       (r["tokens"], ag["tokens"], d))
r2 = run_json(audio_fx, "--ids", ",".join(map(str, ag["prompt_ids"])), "-n", str(ag["generate"]))
report("run without --audio on the same ids gives other tokens (the frames were used)", r2["tokens"] != r["tokens"])
dmel = os.path.join(ROOT, "tests", "fixtures", "audio", "speech_16k_mono_s16.dmel")
frames = os.path.getsize(dmel) // 80
r = run_json(O200K_DEMO, "--prompt", "what is said?", "--audio", dmel, "-n", "6")
want_ids = tiktoken([chat_prompt("what is said?", audio_frames=frames)])[0]
report(f"run --prompt --audio: the chat prompt with {frames} placeholders, one per frame (tiktoken)",
       r["prompt_ids"] == want_ids, (r["prompt_ids"][:20], want_ids[:20]))
r_ids = run_json(O200K_DEMO, "--ids", ",".join(map(str, want_ids)), "--audio", dmel, "-n", "6")
report("run --prompt --audio: the tokens of --ids with the same prompt and frames", r["tokens"] == r_ids["tokens"])
p = inkling("run", "--model", audio_fx, "--ids", "1,2,3", "--audio", os.path.join(audio_fx, "sample.dmel"),
            check=False)
report("run --audio with no placeholders in the ids: exit 1, both counts named",
       p.returncode == 1 and "audio frames (6)" in p.stderr and "placeholders (0)" in p.stderr, p.stderr)

# -- --isa ---------------------------------------------------------------------------------
flags = set(open("/proc/cpuinfo").read().split())
has = {"scalar": True, "avx2": "avx2" in flags and "fma" in flags, "avx512": "avx512f" in flags}
bg = golden("base-hf-f32")
for isa, present in has.items():
    if present:
        r = run_json(os.path.join(FIXTURES, "base-hf-f32"), "--ids", ",".join(map(str, bg["prompt_ids"])),
                     "-n", str(bg["generate"]), "--isa", isa)
        d = max_diff(r["last_logits"], bg["last_logits"])
        report(f"--isa {isa}: reported, the reference's tokens, last logits within 1e-4 ({d:.1e})",
               r["isa"] == isa and r["tokens"] == bg["tokens"] and d <= 1e-4, (r["isa"], r["tokens"], d))
    else:
        p = inkling("run", "--model", os.path.join(FIXTURES, "base-hf-f32"), "--ids", "1,2", "--isa", isa, check=False)
        report(f"--isa {isa} (this CPU lacks it): exit 1, says so",
               p.returncode == 1 and f"does not support {isa}" in p.stderr, p.stderr)
p = inkling("run", "--model", os.path.join(FIXTURES, "base-hf-f32"), "--ids", "1,2", "--isa", "sse9", check=False)
report("--isa with an unknown name: exit 1 naming the ISAs", p.returncode == 1 and "sse9" in p.stderr
       and "scalar, avx2 or avx512" in p.stderr, p.stderr)

# -- --load-weights ------------------------------------------------------------------------
base = os.path.join(FIXTURES, "base-hf-f32")
same = {}
for mode in ("map", "copy", "auto"):
    r = run_json(base, "--ids", ",".join(map(str, bg["prompt_ids"])), "-n", str(bg["generate"]),
                 "--load-weights", mode)
    same[mode] = r["last_logits"]
    d = max_diff(r["last_logits"], bg["last_logits"])
    report(f"--load-weights {mode}: the reference's tokens, last logits within 1e-4 ({d:.1e})",
           r["tokens"] == bg["tokens"] and d <= 1e-4, (r["tokens"], d))
report("--load-weights map, copy and auto: the same logits bit for bit (the same bytes, wherever they live)",
       same["map"] == same["copy"] == same["auto"])
for mode in ("map", "copy"):
    b = json.loads(inkling("bench", "--model", base, "--prompt-tokens", "4", "--decode-tokens", "2",
                           "--load-weights", mode).stdout)
    report(f"bench --load-weights {mode}: the report says where the weights were (weights_memory {mode})",
           b.get("weights_memory") == mode, b.get("weights_memory"))
p = inkling("run", "--model", base, "--ids", "1,2", "--load-weights", "swap", check=False)
report("--load-weights with an unknown mode: exit 1 naming the flag and the modes",
       p.returncode == 1 and "--load-weights: 'swap' is not auto, map or copy" in p.stderr and p.stdout == "",
       (p.returncode, p.stderr[-300:]))


# -- serve --prefill-chunk -----------------------------------------------------------------
def interleaved(chunk):
    """Request `d` (a one-token prompt, decoding) on slot 0 and `p` (the golden prompt) on
    slot 1, written at once: d's tokens before p's first, and p's tokens."""
    eng = Engine([INKLING, "serve", "--model", os.path.join(FIXTURES, "base-hf-f32"), "--slots", "2", "--ctx", "256",
                  "--threads", "2", *(["--prefill-chunk", str(chunk)] if chunk else [])])
    try:
        eng.send(wire.submit("d", 0, b"7", 60, ids=1) +
                 wire.submit("p", 1, " ".join(map(str, bg["prompt_ids"])).encode(), bg["generate"], ids=1))
        before, tokens, ended = None, [], set()
        d_count = 0
        while ended != {"d", "p"}:
            f = eng.frame()
            if f.kind == "DATA" and f.fields[1] == "d":
                d_count += 1
            elif f.kind == "DATA" and f.fields[1] == "p":
                if before is None:
                    before = d_count
                tokens.append(int(f.payload.decode().strip()))
            elif f.kind in ("DONE", "ERROR") and f.fields[1] in ("d", "p"):
                ended.add(f.fields[1])
                if f.kind == "ERROR":
                    raise RuntimeError(" ".join(f.fields))
    finally:
        eng.close()
    return before, tokens


# -- bench --kernels --kernel-shape ---------------------------------------------------------------
rows, cols = 48, 100  # 100 columns: a partial last chunk of 32 (bf16) and 128 padded (int8/int4)
p = inkling("bench", "--kernels", "--kernel-shape", f"{rows}x{cols}", "--kernel-mb", "1", "--threads", "1")
k = json.loads(p.stdout)
padded = (cols + 31) // 32 * 32
want_bytes = {"bf16": rows * cols * 2, "int8": rows * padded + rows * 4, "int4": rows * padded // 2 + rows * padded // 32 * 4}
got = {f["format"]: f for f in k.get("formats", [])}
sizes_ok = all(f["matrix_bytes"] == want_bytes[name.split()[0]] and
               f["n1_matrices"] == max(1, -(-(1 << 20) // f["matrix_bytes"])) for name, f in got.items())
# The one-core in-L2 figure: a rate for every format, and its ratio to a core's share of the
# read loop consistent with it (one thread here: a core's share is the whole read loop).
in_l2_ok = all(f.get("n1_in_l2_one_core_gb_s", 0) > 0 and
               abs(f["n1_in_l2_one_core_x_read_loop_share"] * (f["bandwidth_before_gb_s"] + f["bandwidth_after_gb_s"]) / 2
                   - f["n1_in_l2_one_core_gb_s"]) < 1e-6 * f["n1_in_l2_one_core_gb_s"] for f in got.values())
report(f"bench --kernels --kernel-shape {rows}x{cols}: every format measured at that shape (matrix bytes from it, "
       f"copies for --kernel-mb 1, n = 1 on one core in L2 beside it), ggml's figures left out",
       k.get("rows") == rows and k.get("cols") == cols and {"bf16 exact", "int8", "int4 g32"} <= set(got)
       and sizes_ok and in_l2_ok and k.get("ggml_source") == "none at this shape"
       and all(f["ggml_n64_gflop_s"] == "" for f in got.values()), (k.get("rows"), k.get("cols"), list(got)))
for bad, why in (("1024", "no 'x'"), ("1024x0", "columns must lie in"), ("axb", "rows 'a' is not a whole number")):
    p = inkling("bench", "--kernels", "--kernel-shape", bad, check=False)
    report(f"bench --kernels --kernel-shape {bad}: an error naming the flag ({why})",
           p.returncode != 0 and f"--kernel-shape {bad}" in p.stderr and why in p.stderr and p.stdout == "",
           (p.returncode, p.stderr[-300:]))

P = len(bg["prompt_ids"])
for chunk in (None, 1, 5, 31):
    before, tokens = interleaved(chunk)
    rounds = math.ceil(P / (chunk or 256))
    report(f"serve --prefill-chunk {chunk or 'default (256)'}: the reference's tokens, the {P}-token prompt in "
           f"{rounds} rounds ({before} tokens of the request beside it first, 1 + {rounds} expected)",
           tokens == bg["tokens"] and before == 1 + rounds, (before, tokens, bg["tokens"]))
sys.exit(checks.finish())
