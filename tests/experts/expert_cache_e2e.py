#!/usr/bin/env python3
"""expert_cache_e2e.py [BUILD]: the expert cache of a converted model behind `inkling serve`
and `inkling run`, as docs/engine.md ("Expert cache") states it:

  - usage history: not written before 4,096 tokens; written while serving once 4,096 have
    gone through (the engine still running), and again at SIGTERM with every token counted;
    each sparse layer's counts add up to top_k rows a token, decayed by at most
    2^(-tokens/65536); a restarted engine pins the history's most used experts, and its
    warm-up (on by default, --warm-experts off) fills the free slots with the next most used
  - a CRC error while serving: one expert record of experts.inkx damaged (found from the
    container's header, docs/container.md): the request that routes to it ends in
    ERROR INTERNAL naming the file, the layer and the expert; a request that does not route
    to it gives the tokens of the undamaged model, and the damaged record is refused again
  - the O_DIRECT fallback: on a filesystem that refuses O_DIRECT (ramfs, mounted in a user
    and mount namespace of its own) the cache says "buffered+DONTNEED reads" and gives the
    tokens it gives from the disk, where it says "O_DIRECT reads". Where namespaces are not
    allowed the check prints a SKIP line saying why (a FAIL under CI=true).

PASS/FAIL lines; exit 0 when all pass.
"""
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Engine  # noqa: E402
from lib.engine_requests import run_request  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
INKLING = os.path.join(build, "inkling")
MIXED = os.path.join(build, "fixtures", "mixed-hf-f32")   # E=16, top-4, sparse layers 0, 2, 3
checks = Checks("expert cache e2e")
report = checks.report
HALF_LIFE = 65536


def serve(model, *flags):
    return Engine([INKLING, "serve", "--model", model, "--slots", "1", "--threads", "2", *flags])


def container_header(path):
    """The JSON header of experts.inkx (magic, u32 length, u32 0, JSON)."""
    with open(path, "rb") as f:
        head = f.read(16)
        if head[:8] != b"INKLEXP1":
            raise RuntimeError(f"{path}: not an expert container")
        return json.loads(f.read(struct.unpack("<I", head[8:12])[0]))


def usage(path):
    with open(path) as f:
        return json.load(f)


def ids_text(ids):
    return " ".join(map(str, ids))


tmp = tempfile.mkdtemp(prefix="expert-cache-e2e-")
try:
    conv = os.path.join(tmp, "mixed-int8")
    subprocess.run([INKLING, "convert", MIXED, conv, "--experts", "int8"], check=True, capture_output=True)
    cfg = json.load(open(os.path.join(conv, "config.json")))
    top_k = cfg["num_experts_per_tok"]
    vocab = cfg["unpadded_vocab_size"]

    # -- usage history: every 4,096 tokens and at SIGTERM ------------------------------------
    hist = os.path.join(tmp, "usage.json")
    short = [(i * 7 + 3) % vocab for i in range(100)]
    long_ = [(i * 13 + 5) % vocab for i in range(4100)]
    eng = serve(conv, "--ctx", "8192", "--usage-file", hist, "--cap", "4")
    eng.frame()  # the info STATS
    r1 = run_request(eng, "u1", 0, ids_text(short), 1, ids=1)
    before = os.path.exists(hist)
    r2 = run_request(eng, "u2", 0, ids_text(long_), 3, ids=1, reset=1)
    # Tokens fed: each prompt, and every emitted token but the last.
    fed = len(short) + len(r1.tokens) - 1 + len(long_) + len(r2.tokens) - 1
    mid = usage(hist) if os.path.exists(hist) else None
    report(f"usage history: nothing written after {len(short)} tokens, written while serving after {fed} "
           f"({mid and mid['tokens']} in the file, the engine still running)",
           r1.done and r2.done and not before and mid is not None and 4096 <= mid["tokens"] < fed
           and eng.proc.poll() is None, (r1.end, r2.end, before, mid and mid["tokens"], fed))
    eng.proc.send_signal(signal.SIGTERM)
    rc = eng.proc.wait(timeout=60)
    eng.close()
    end = usage(hist)
    report(f"usage history: SIGTERM ends the engine (exit {rc}) and saves every token ({end['tokens']} of {fed})",
           rc == 0 and end["tokens"] == fed, (rc, end["tokens"], fed))
    decay = 2 ** (-fed / HALF_LIFE)
    sums = [sum(row) for row in end["counts"]]
    report(f"usage history: each sparse layer's counts add up to top_k x tokens, decayed "
           f"({[round(s) for s in sums]} within [{top_k * fed * decay:.0f}, {top_k * fed}])",
           end["layers"] == [0, 2, 3] and end["experts"] == 16 and end["half_life_tokens"] == HALF_LIFE
           and all(top_k * fed * decay - 1e-6 <= s <= top_k * fed + 1e-6 for s in sums), (sums, end["layers"]))
    def restarted(*flags):
        """STATS of an engine restarted on the history (once its warm-up is done), its log."""
        eng = serve(conv, "--ctx", "256", "--usage-file", hist, "--cap", "4", "--pin-experts", "2", *flags)
        eng.frame()  # the info STATS
        for _ in range(200):
            eng.send(b"STATS\n")
            st = eng.frame().json()
            if st.get("expert_cache", {}).get("warm_pending") == 0:
                break
        log = eng.log_tail()
        eng.close()
        # The residency map (one byte a (layer, expert), tier << 6): the RAM tier's experts.
        hexmap = st.get("experts", {}).get("map", "")
        in_ram = [{e for e in range(16) if (int(hexmap[2 * (li * 16 + e):2 * (li * 16 + e) + 2], 16) >> 6) == 1}
                  for li in range(3)] if len(hexmap) == 2 * 3 * 16 else []
        return st, in_ram, log

    ranked = [sorted(range(16), key=lambda e: (-row[e], e)) for row in end["counts"]]
    hottest = [set(r[:2]) for r in ranked]
    # Before any request, without the warm-up, the RAM tier holds the pinned experts only.
    st, in_ram, log = restarted("--warm-experts", "off")
    report(f"usage history: a restarted engine pins each layer's 2 most used experts from it ({hottest})",
           st.get("expert_cache", {}).get("pinned") == 6 and "pins 2 (6 pinned over 3 layers)" in log
           and "warm-up off" in log and in_ram == hottest and st["expert_cache"].get("warmed") == 0,
           (st.get("expert_cache"), in_ram, log[-400:]))
    # With it (the default) the two free slots a layer fill with the next two most used.
    st, in_ram, log = restarted()
    report(f"warm-up: the free slots fill with each layer's next most used experts "
           f"({[set(r[:4]) for r in ranked]}), nothing missed",
           in_ram == [set(r[:4]) for r in ranked] and st["expert_cache"].get("warmed") == 6
           and st["expert_cache"].get("misses") == 0 and "warm-up" in log,
           (st.get("expert_cache"), in_ram, log[-400:]))

    # -- a CRC error while serving --------------------------------------------------------------
    # Which experts of the first sparse layer (no prefetch reaches it) each prompt routes to,
    # from the undamaged model's usage history.
    def experts_of(ids, n):
        f = os.path.join(tmp, "routes.json")
        if os.path.exists(f):
            os.unlink(f)
        p = subprocess.run([INKLING, "run", "--model", conv, "--ids", ",".join(map(str, ids)), "-n", str(n),
                            "--cap", "16", "--pin-experts", "0", "--usage-file", f, "--threads", "2"],
                           capture_output=True, text=True, check=True)
        return {e for e, c in enumerate(usage(f)["counts"][0]) if c > 0}, p.stdout.split()

    hurt_prompt = json.load(open(os.path.join(MIXED, "make_tiny.json")))["suggested_prompt"]
    hurt_set, _ = experts_of(hurt_prompt, 4)
    safe_prompt, safe_set, safe_tokens = None, None, None
    for first in range(1, 40):  # a one-token prompt routes to top_k experts only
        s, tokens = experts_of([first], 1)
        if hurt_set - s:
            safe_prompt, safe_set, safe_tokens = [first], s, tokens
            break
    victim = min(hurt_set - safe_set) if safe_set is not None else None
    report(f"CRC setup: expert {victim} of layer 0 is routed to by the long prompt, not by {safe_prompt}",
           victim is not None, (hurt_set, safe_set))
    if victim is not None:
        damaged = os.path.join(tmp, "damaged")
        shutil.copytree(conv, damaged)
        inkx = os.path.join(damaged, "experts.inkx")
        h = container_header(inkx)
        at = h["data_offset"] + (0 * h["experts"] + victim) * h["record_bytes"] + 100  # layers[0] is 0
        with open(inkx, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x5A]))
        eng = serve(damaged, "--ctx", "256", "--cap", "16", "--pin-experts", "0", "--usage-file", "off")
        eng.frame()
        bad = run_request(eng, "hurt", 0, ids_text(hurt_prompt), 4, ids=1)
        detail = " ".join(bad.end.fields[3:])
        report(f"CRC error while serving: ERROR INTERNAL naming the file, layer 0 and expert {victim}",
               bad.error_code == "INTERNAL" and "CRC mismatch" in detail and inkx in detail
               and f"layer 0, expert {victim}" in detail, bad.end.fields)
        ok = run_request(eng, "safe", 0, ids_text(safe_prompt), 1, ids=1, reset=1)
        report("CRC error while serving: the engine serves on, a request not routed there gives the "
               "undamaged model's tokens", ok.done and ok.tokens == safe_tokens and eng.proc.poll() is None,
               (ok.end and ok.end.fields, ok.tokens, safe_tokens))
        again = run_request(eng, "hurt2", 0, ids_text(hurt_prompt), 4, ids=1, reset=1)
        report("CRC error while serving: the damaged record is refused again, never used",
               again.error_code == "INTERNAL" and f"expert {victim}" in " ".join(again.end.fields), again.end.fields)
        report("CRC error while serving: the engine exits 0 at EOF", eng.close() == 0)

    # -- the O_DIRECT fallback ------------------------------------------------------------------
    args = ["--ids", ids_text(hurt_prompt).replace(" ", ","), "-n", "8", "--cap", "2", "--pin-experts", "0",
            "--usage-file", "off", "--threads", "2"]
    disk = subprocess.run([INKLING, "run", "--model", conv, *args], capture_output=True, text=True, check=True)
    report("O_DIRECT: a converted model on this disk reads its experts with O_DIRECT",
           "O_DIRECT reads" in disk.stderr, disk.stderr[-400:])
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        why = f"no user and mount namespace here for a ramfs (unshare: {probe.stderr.strip()})"
        if os.environ.get("CI") == "true":  # as tests/run_all.sh: a skip under CI is a lost guard
            report("O_DIRECT fallback: a ramfs to run on", False, why)
        else:
            print(f"SKIP O_DIRECT fallback: {why}", flush=True)
    else:
        mnt = os.path.join(tmp, "ramfs")
        os.mkdir(mnt)
        # ramfs has no direct I/O: open(O_DIRECT) is refused with EINVAL.
        script = ('set -e; mount -t ramfs ramfs "$1"; cp -r "$2" "$1/m"; shift 2; exec "$@"')
        p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", mnt, conv,
                            INKLING, "run", "--model", os.path.join(mnt, "m"), *args],
                           capture_output=True, text=True, timeout=120)
        report("O_DIRECT fallback: on ramfs the cache reads buffered (pread + DONTNEED) and says so",
               p.returncode == 0 and "buffered+DONTNEED reads" in p.stderr, (p.returncode, p.stderr[-400:]))
        report("O_DIRECT fallback: the tokens read from disk with O_DIRECT",
               p.stdout.split() == disk.stdout.split() and len(disk.stdout.split()) == 8,
               (p.stdout, disk.stdout))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(checks.finish())
