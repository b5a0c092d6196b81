#!/usr/bin/env python3
"""wine_e2e.py BUILD WINDOWS_BUILD: the mingw-w64 binaries of `make windows` under Debian's
wine64, each against an oracle the Windows build did not produce:

  - the negative control: the Linux conformance suite against echo-engine-text-stdio.exe
    (the echo engine with stdio left in the CRT's text mode) must fail, on the READY
    sentinel's CR LF: the suite that passes the real binaries can see the bug it guards
  - `inkling.exe run --ids` on the tiny fixtures: the PyTorch reference's tokens
    (tests/fixtures/golden), the Linux build's tokens, logits within 1e-4 of the reference;
    with `--load-weights copy` (the files read into VirtualAlloc'd memory) the same
  - `coli.exe chat` on the trained demo model through a pipe (private engine inkling.exe):
    the reference's greedy answer (tests/fixtures/demo), a footer, exit 0; no CR byte

WINE (default /usr/lib/wine/wine64), WINEPREFIX and WINEDEBUG come from the environment.
PASS/FAIL lines; exit 0 when all pass.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks  # noqa: E402

build = os.path.abspath(sys.argv[1])
win = os.path.abspath(sys.argv[2])
WINE = os.environ.get("WINE", "/usr/lib/wine/wine64")
FIXTURES = os.path.join(build, "fixtures")
GOLDEN = os.path.join(ROOT, "tests", "fixtures", "golden")
checks = Checks("windows under wine")
report = checks.report


def wine(exe, *args, stdin="", timeout=300):
    return subprocess.run([WINE, os.path.join(win, exe), *args], input=stdin.encode(), capture_output=True,
                          timeout=timeout)


# -- the negative control ------------------------------------------------------------------
p = subprocess.run([os.path.join(build, "protocol-conformance"), "--scratch", os.environ.get("TMPDIR", "/tmp"),
                    "--stop-signal", "INT", "--", WINE, os.path.join(win, "echo-engine-text-stdio.exe")],
                   capture_output=True, text=True, timeout=300)
sentinel_fail = [line for line in p.stdout.splitlines() if line.startswith("FAIL first 10 bytes are the READY sentinel")]
report("negative control: the conformance suite fails a text-mode-stdio engine (exit 1), on the sentinel's CR LF",
       p.returncode == 1 and sentinel_fail and "\\x0d\\x0a" in sentinel_fail[0], (p.returncode, p.stdout[-1500:]))


# -- the oracle fixtures -------------------------------------------------------------------
def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")


for name in ("base-hf-f32", "dense-release-bf16", "mixed-hf-f32", "ring-hf-f32"):
    path = os.path.join(GOLDEN, name + ".json")
    if not os.path.exists(path):
        report(f"{name}: a golden file", False, path + " is missing")
        continue
    g = json.load(open(path))
    if isinstance(g["last_logits"], str):
        g["last_logits"] = json.loads(g["last_logits"])
    args = ["run", "--model", os.path.join(FIXTURES, name), "--ids", ",".join(map(str, g["prompt_ids"])),
            "-n", str(g["generate"]), "--json", "--threads", "2"]
    pw = wine("inkling.exe", *args)
    pl = subprocess.run([os.path.join(build, "inkling"), *args], capture_output=True, timeout=300)
    try:
        rw, rl = json.loads(pw.stdout), json.loads(pl.stdout)
    except ValueError:
        report(f"inkling.exe run on {name}: JSON out", False, (pw.returncode, pw.stdout[-300:], pw.stderr[-600:]))
        continue
    d = max_diff(rw["last_logits"], g["last_logits"])
    tol = 1e-4 if "f32" in name else 0.3  # bf16 numerics: the bounds of bf16_numerics_test
    report(f"inkling.exe run on {name}: the reference's {g['generate']} tokens, the Linux build's, "
           f"last logits within {tol:g} ({d:.1e})",
           pw.returncode == 0 and rw["tokens"] == g["tokens"] and rw["tokens"] == rl["tokens"] and d <= tol,
           (rw["tokens"][:12], g["tokens"][:12], rl["tokens"][:12], d))

# -- --load-weights copy: the files read into the process's own memory (VirtualAlloc + ReadFile)
g = json.load(open(os.path.join(GOLDEN, "base-hf-f32.json")))
if isinstance(g["last_logits"], str):
    g["last_logits"] = json.loads(g["last_logits"])
pw = wine("inkling.exe", "run", "--model", os.path.join(FIXTURES, "base-hf-f32"), "--ids",
          ",".join(map(str, g["prompt_ids"])), "-n", str(g["generate"]), "--json", "--threads", "2",
          "--load-weights", "copy")
try:
    rw = json.loads(pw.stdout)
    d = max_diff(rw["last_logits"], g["last_logits"])
    report(f"inkling.exe run --load-weights copy: the reference's tokens, last logits within 1e-4 ({d:.1e})",
           pw.returncode == 0 and rw["tokens"] == g["tokens"] and d <= 1e-4, (rw["tokens"][:12], d))
except ValueError:
    report("inkling.exe run --load-weights copy: JSON out", False, (pw.returncode, pw.stdout[-300:], pw.stderr[-600:]))

# -- coli.exe chat through a pipe ----------------------------------------------------------
demo = json.load(open(os.path.join(ROOT, "tests", "fixtures", "demo", "inkling-demo.json")))
want = demo["text"].split("<|end_message|>")[0]
p = wine("coli.exe", "chat", "--no-attach", "--model", os.path.join(ROOT, "models", "inkling-demo"),
         "--temperature", "0", "--max-tokens", "64", stdin=demo["prompt_text"] + "\n:q\n")
out = p.stdout.decode(errors="replace")
report("coli.exe chat (private engine inkling.exe) on the trained demo model: the reference's greedy answer, "
       "a footer, exit 0",
       p.returncode == 0 and ("assistant: " + want + "\n") in out and " tokens, " in out,
       (p.returncode, out[-800:], want, p.stderr[-600:]))
report("coli.exe chat: no CR byte in what it printed (binary stdout)", b"\r" not in p.stdout, p.stdout[-200:])

sys.exit(checks.finish())
