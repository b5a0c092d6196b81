#!/usr/bin/python3
"""make-tiny writes every tensor as it generates it (tools/make-tiny/make_tiny.py).

  make_tiny_stream_test.py BUILD_DIR

- The streamed files hold the bytes the in-memory path (make_weights without lazy, as
  tools/train-tiny uses it) encodes, for both layouts and dtypes of three geometries.
- A `small`-geometry model (Inkling-Small's vocabulary, narrowed so that it stays a few
  hundred MB) is written by a process whose peak resident memory stays below its largest
  tensor's f32 size: nothing is built whole in memory. It loads in the engine (`inkling
  info`) with the layer kinds of the real schedule.
- --describe: its byte count is the written weight bytes; its key follows the geometry.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAKE_TINY = os.path.join(ROOT, "tools", "make-tiny", "make_tiny.py")
sys.path.insert(0, os.path.dirname(MAKE_TINY))
import make_tiny  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib.safetensors_bytes import tensors_of  # noqa: E402

failures = 0


def report(name, ok, detail=""):
    global failures
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
    failures += 0 if ok else 1


def written(outdir):
    out = {}
    for fn in sorted(os.listdir(outdir)):
        if fn.endswith(".safetensors") and fn != "audio.safetensors":
            out.update(tensors_of(os.path.join(outdir, fn)))
    return out


def eager(geometry, layout, dtype):
    g = make_tiny.GEOMETRIES[geometry]
    model, _ = make_tiny.layout_tensors(g, make_tiny.make_weights(g, geometry, 1), layout, "model")
    return {name: (dt, shape, data) for name, dt, shape, data in make_tiny.encode(model, dtype)}


def main(build):
    with tempfile.TemporaryDirectory() as tmp:
        for geometry in ("base", "mixed", "ring"):
            for layout in ("release", "hf"):
                for dtype in ("f32", "bf16"):
                    d = os.path.join(tmp, f"{geometry}-{layout}-{dtype}")
                    make_tiny.write_fixture(d, geometry, layout, dtype, 1)
                    got, want = written(d), eager(geometry, layout, dtype)
                    bad = sorted(k for k in want if got.get(k) != want[k])
                    report(f"streamed == in memory: {geometry} {layout} {dtype} ({len(want)} tensors)",
                           not bad and set(got) == set(want), f"differ: {bad[:5]}, names {set(got) ^ set(want)}")

        # Inkling-Small's real vocabulary and layer schedule, narrowed: embed and lm_head are
        # 201024 x 512 (412 MB each as f32), the rest small.
        sets = ["D=512", "dense_inter=1024", "moe_inter=256", "E=8", "heads=8", "kv=2", "swa_heads=8", "swa_kv=2"]
        d = os.path.join(tmp, "small-narrow")
        args = [sys.executable, MAKE_TINY, d, "--geometry", "small", "--layout", "release", "--dtype", "bf16"]
        for s in sets:
            args += ["--set", s]
        subprocess.run(args, check=True)   # the first child: RUSAGE_CHILDREN's peak is its own
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        largest_f32_mb = 201024 * 512 * 4 / 2**20
        report(f"small-narrow written with a peak of {peak_mb:.0f} MB resident (largest tensor {largest_f32_mb:.0f} MB "
               f"as f32)", 0 < peak_mb < largest_f32_mb / 2,
               f"peak {peak_mb:.0f} MB")
        sizes = sum(len(t[2]) for t in written(d).values())
        desc = json.loads(subprocess.run([sys.executable, MAKE_TINY, "--describe", "--geometry", "small", "--layout",
                                          "release", "--dtype", "bf16"] + [x for s in sets for x in ("--set", s)],
                                         check=True, capture_output=True, text=True).stdout)
        report("--describe's weight_bytes are the bytes written", desc["weight_bytes"] == sizes,
               f"{desc['weight_bytes']} vs {sizes}")
        other = make_tiny.describe("small", "release", "bf16", 1, sets=sets[:-1])
        again = make_tiny.describe("small", "release", "bf16", 1, sets=sets)
        report("--describe's key is the geometry's", again["key"] == desc["key"] and other["key"] != desc["key"],
               f"{desc['key']} {again['key']} {other['key']}")
        info = subprocess.run([os.path.join(build, "inkling"), "info", "--model", d], capture_output=True, text=True)
        ok = info.returncode == 0
        detail = info.stderr[-400:]
        if ok:
            kinds = json.loads(info.stdout).get("layer_kinds")
            local, sparse = make_tiny.layer_kinds(make_tiny.with_overrides("small", sets))
            want = " ".join(("L" if lo else "G") + ("m" if sp else "d") for lo, sp in zip(local, sparse))
            ok = kinds == want == "Ld Ld Lm Lm Lm Gm"   # dense 0-1, MoE 2-5, layer 5 global
            detail = f"layer_kinds {kinds}, make_tiny's {want}"
            print(f"  inkling info: layer_kinds {kinds}")
        report("small-narrow loads in the engine (inkling info)", ok, detail)
    print(f"{'FAIL' if failures else 'OK'}: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build"))
