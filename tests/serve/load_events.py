#!/usr/bin/env python3
"""`inkling serve --load-events` (PROTOCOL.md §4): before READY the engine reports each step
of its load as an EVENT load_progress frame (what the gateway's start-up deadline resets
on); without the flag READY stays the first bytes on stdout. Real engine, tiny fixture, the
Vulkan chain on lavapipe for the per-layer device stage.

Usage: load_events.py BUILD_DIR. Prints PASS/FAIL lines.
"""
import io
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from lib import Checks, wire  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
model = os.path.join(build, "fixtures", "base-hf-f32")
checks = Checks("engine load events")


def serve(*extra):
    """The engine's whole stdout and stderr for a run with no input (EOF at once: it loads,
    says READY and its info STATS, and exits 0)."""
    r = subprocess.run([os.path.join(build, "inkling"), "serve", "--model", model, "--slots", "1", "--ctx", "128",
                        "--threads", "2", *extra], stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def frames_before_ready(out):
    """(the frames before READY, the frame after it, whether READY came)."""
    stream = io.BytesIO(out)
    before = []
    while True:
        if stream.getvalue()[stream.tell():].startswith(wire.READY):
            stream.read(len(wire.READY))
            return before, wire.read_frame(stream), True
        try:
            before.append(wire.read_frame(stream))
        except EOFError:
            return before, None, False


rc, out, err = serve()
checks.report("without --load-events the first stdout bytes are the READY sentinel", rc == 0 and out.startswith(wire.READY),
              (rc, out[:40], err[-400:]))

rc, out, err = serve("--load-events")
before, after, ready = frames_before_ready(out)
events = [f.json() for f in before if f.kind == "EVENT"]
stages = [e.get("stage") for e in events]
checks.report("with --load-events only EVENT load_progress frames precede READY, then READY and the info STATS",
              rc == 0 and ready and before and all(f.kind == "EVENT" for f in before)
              and all(e.get("kind") == "load_progress" for e in events)
              and after is not None and after.kind == "STATS" and after.json().get("kind") == "info",
              (rc, [f.kind for f in before], after and after.kind, err[-400:]))
# The stages in the order the load runs them, each reported once it begins.
order = ["model", "tokenizer", "experts", "device"]
seen = [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s]
checks.report("the stages come in load order: model, tokenizer, experts, device", seen == order, stages)

rc, out, err = serve("--load-events", "--vulkan", "on")
before, after, ready = frames_before_ready(out)
device = [f.json() for f in before if f.kind == "EVENT" and f.json().get("stage") == "device" and "total" in f.json()]
layers = json.load(open(os.path.join(model, "config.json"))).get("num_hidden_layers")
last = device[-1] if device else {}
checks.report("on a device, the upload reports its layers: the last says done == total == the model's layers",
              rc == 0 and ready and last.get("done") == last.get("total") == layers
              and all(0 < d["done"] <= d["total"] for d in device)
              and [d["done"] for d in device] == sorted(d["done"] for d in device),
              (rc, device, layers, err[-600:]))

sys.exit(checks.finish())
