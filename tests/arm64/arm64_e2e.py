#!/usr/bin/env python3
"""arm64_e2e.py BUILD ARM64_BUILD: the ARM64 engine of `make arm64` under QEMU's user-mode
emulator (qemu-aarch64-static), on three CPU models, each against an oracle the ARM64 build
did not produce:

  - the start-up banner (`inkling serve`'s "[serve] ready: {...}" line) and `inkling info`
    name the ISA level and kernels the CPU model calls for: max → i8mm (SMMLA and SDOT),
    cortex-a76 → dotprod (SDOT; no i8mm), cortex-a72 → neon (no dotprod); `--isa` above
    the CPU's level is refused, naming it
  - `inkling run --ids` on the tiny fixtures (tests/fixtures/golden, the PyTorch
    reference's): every fixture on max, the bf16 ones on the other two; the reference's
    tokens and argmax, the Linux build's tokens, last logits within the reference's bound
  - int8 and int4 models (`inkling convert` of the Linux build, every matrix quantized):
    the last logits bitwise equal on every CPU model and with --isa scalar (the kernels give
    the scalar reference's bits), the tokens the Linux build's
  - `coli chat` (ARM64) on the trained demo model through a pipe, its private engine the
    ARM64 inkling: the reference's greedy answer (tests/fixtures/demo), a footer, exit 0

PASS/FAIL lines; exit 0 when all pass.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks  # noqa: E402

build = os.path.abspath(sys.argv[1])
arm = os.path.abspath(sys.argv[2])
QEMU = shutil.which("qemu-aarch64-static") or "qemu-aarch64-static"
FIXTURES = os.path.join(build, "fixtures")
GOLDEN = os.path.join(ROOT, "tests", "fixtures", "golden")
checks = Checks("arm64 under qemu")
report = checks.report

# CPU model → the ISA level the engine must pick and the kernels its banner must name.
MODELS = {
    "max": ("i8mm", {"bf16": "neon-fma", "int8": "smmla+sdot", "int4": "smmla+sdot"}),
    "cortex-a76": ("dotprod", {"bf16": "neon-fma", "int8": "sdot", "int4": "sdot"}),
    "cortex-a72": ("neon", {"bf16": "neon-fma", "int8": "neon", "int4": "neon"}),
}


def qemu(cpu, *args, stdin=b"", timeout=600):
    return subprocess.run([QEMU, "-cpu", cpu, os.path.join(arm, "inkling"), *args], input=stdin,
                          capture_output=True, timeout=timeout)


def host(*args, timeout=600):
    return subprocess.run([os.path.join(build, "inkling"), *args], capture_output=True, timeout=timeout)


def as_json(p):
    try:
        return json.loads(p.stdout)
    except ValueError:
        return None


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")


# -- the banner and info -------------------------------------------------------------------
base = os.path.join(FIXTURES, "base-hf-f32")
for cpu, (isa, kernels) in MODELS.items():
    p = qemu(cpu, "serve", "--model", base, "--slots", "1", "--ctx", "64", "--threads", "2")
    err = p.stderr.decode(errors="replace")
    banner = next((line for line in err.splitlines() if line.startswith("[serve] ready: ")), None)
    info = json.loads(banner[len("[serve] ready: "):]) if banner else {}
    report(f"-cpu {cpu}: the start-up banner names isa {isa} and kernels {kernels}, exit 0 at EOF",
           p.returncode == 0 and info.get("isa") == isa and info.get("kernels") == kernels,
           (p.returncode, banner, err[-600:]))
    j = as_json(qemu(cpu, "info", "--model", base)) or {}
    report(f"-cpu {cpu}: inkling info says isa {isa}, the same kernels",
           j.get("isa") == isa and j.get("kernels") == kernels, (j.get("isa"), j.get("kernels")))
for cpu, refused in (("cortex-a76", "i8mm"), ("cortex-a72", "dotprod")):
    p = qemu(cpu, "info", "--model", base, "--isa", refused)
    err = p.stderr.decode(errors="replace")
    report(f"-cpu {cpu}: --isa {refused} is refused, naming it", p.returncode != 0 and refused in err,
           (p.returncode, err[-300:]))
j = as_json(qemu("max", "info", "--model", base, "--isa", "scalar")) or {}
report("--isa scalar: the scalar kernels named", j.get("kernels") == {"bf16": "scalar", "int8": "scalar", "int4": "scalar"},
       j.get("kernels"))


# -- the oracle fixtures -------------------------------------------------------------------
def run_args(name, g):
    args = ["run", "--model", os.path.join(FIXTURES, name), "--ids", ",".join(map(str, g["prompt_ids"])),
            "-n", str(g["generate"]), "--json", "--threads", "2"]
    if g.get("audio"):
        args += ["--audio", os.path.join(FIXTURES, name, g["audio"])]
    return args


names = sorted(f[:-5] for f in os.listdir(GOLDEN) if f.endswith(".json"))
report("the golden fixtures are there (12 or more)", len(names) >= 12, names)
for name in names:
    g = json.load(open(os.path.join(GOLDEN, name + ".json")))
    if isinstance(g["last_logits"], str):
        g["last_logits"] = json.loads(g["last_logits"])
    args = run_args(name, g)
    linux = as_json(host(*args)) or {}
    # The bf16 kernel is the same NEON one on every level; the fallback models run the bf16 fixtures.
    for cpu in ("max", "cortex-a76", "cortex-a72") if "bf16" in name else ("max",):
        p = qemu(cpu, *args)
        r = as_json(p)
        if r is None:
            report(f"-cpu {cpu} run on {name}: JSON out", False, (p.returncode, p.stdout[-300:], p.stderr[-600:]))
            continue
        d = max_diff(r["last_logits"], g["last_logits"])
        tol = 1e-4  # the bound of forward_oracle_test (bf16 weights are widened to f32 on both sides)
        report(f"-cpu {cpu} run on {name}: the reference's {g['generate']} tokens and argmax, the Linux build's "
               f"tokens, last logits within {tol:g} ({d:.1e})",
               p.returncode == 0 and r["tokens"] == g["tokens"] and r["prompt_argmax"] == g["prompt_argmax"] and
               r["tokens"] == linux.get("tokens") and d <= tol,
               (r["tokens"][:12], g["tokens"][:12], (linux.get("tokens") or [])[:12], d))

# -- int8 and int4 models: every kernel level gives the scalar reference's bits -------------
scratch = tempfile.mkdtemp(prefix="inkling-arm64-e2e.")
try:
    prompt = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"
    for kind, flags in (("int8", ["--experts", "int8", "--dense", "int8"]),
                        ("int4", ["--experts", "int4", "--dense", "int4g64"])):
        out = os.path.join(scratch, kind)
        c = host("convert", os.path.join(FIXTURES, "mixed-hf-f32"), out, *flags)
        if c.returncode != 0:
            report(f"{kind}: inkling convert (Linux build)", False, c.stderr[-600:])
            continue
        args = ["run", "--model", out, "--ids", prompt, "-n", "8", "--json", "--threads", "2"]
        linux = as_json(host(*args, "--isa", "scalar")) or {}
        runs = {}
        for label, cpu, extra in (("scalar", "max", ["--isa", "scalar"]), ("i8mm", "max", []),
                                  ("dotprod", "cortex-a76", []), ("neon", "cortex-a72", [])):
            p = qemu(cpu, *args, *extra)
            runs[label] = as_json(p) or {"stderr": p.stderr[-400:]}
        ref = runs["scalar"]
        for label in ("i8mm", "dotprod", "neon"):
            r = runs[label]
            report(f"{kind} model: the {label} level's last logits bitwise the scalar reference's, same tokens",
                   "last_logits" in r and r["last_logits"] == ref.get("last_logits") and r["tokens"] == ref["tokens"]
                   and r.get("isa") == label,
                   (r.get("isa"), r.get("tokens"), ref.get("tokens"), r.get("stderr")))
        report(f"{kind} model: the ARM64 tokens are the Linux build's (--isa scalar)",
               ref.get("tokens") is not None and ref.get("tokens") == linux.get("tokens"),
               (ref.get("tokens"), linux.get("tokens")))

    # -- coli chat through a pipe ----------------------------------------------------------
    # Its private engine is an ARM64 binary too; with no binfmt_misc here an exec of one fails,
    # so --engine is a host script that runs it under QEMU (coli's own exec goes through).
    wrapper = os.path.join(scratch, "inkling-qemu")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {QEMU} -cpu max {os.path.join(arm, 'inkling')} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    demo = json.load(open(os.path.join(ROOT, "tests", "fixtures", "demo", "inkling-demo.json")))
    want = demo["text"].split("<|end_message|>")[0]
    p = subprocess.run([QEMU, "-cpu", "max", os.path.join(arm, "coli"), "chat", "--no-attach", "--engine", wrapper,
                        "--model", os.path.join(ROOT, "models", "inkling-demo"), "--temperature", "0",
                        "--max-tokens", "64"], input=(demo["prompt_text"] + "\n:q\n").encode(), capture_output=True,
                       timeout=600)
    out = p.stdout.decode(errors="replace")
    report("coli chat (ARM64, private ARM64 engine) on the trained demo model: the reference's greedy answer, "
           "a footer, exit 0",
           p.returncode == 0 and ("assistant: " + want + "\n") in out and " tokens, " in out,
           (p.returncode, out[-800:], want, p.stderr[-600:]))
finally:
    shutil.rmtree(scratch, ignore_errors=True)

sys.exit(checks.finish())
