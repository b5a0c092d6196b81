#!/usr/bin/env python3
"""serve_e2e.py [BUILD]: hostile frames against the real engine (`inkling serve` on the demo
model build/demo-model, which has a tokenizer and a padded vocabulary). Each frame must be
answered by an ERROR frame for its request, and the engine must serve the next request.
PASS/FAIL lines; exit 0 when all pass.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Engine  # noqa: E402
from lib import wire  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
model = os.path.join(build, "demo-model")
checks = Checks("engine serve e2e")


def until_end(eng, rid):
    """The frames of request `rid` up to its DONE or ERROR (frames of others are skipped)."""
    frames = []
    while True:
        f = eng.frame()
        if len(f.fields) > 1 and f.fields[1] == rid:
            frames.append(f)
            if f.kind in ("DONE", "ERROR"):
                return frames


def serves_on(eng, name):
    """After a hostile frame: STATS is answered and a plain request runs to DONE."""
    eng.send(wire.stats())
    while eng.frame().kind != "STATS":
        pass
    eng.submit("ok", 0, b"1 2 3", 2, ids=1)
    frames = until_end(eng, "ok")
    checks.report(f"{name}: the engine serves the next request", frames[-1].kind == "DONE" and eng.proc.poll() is None,
                  [f.fields for f in frames])


eng = Engine([os.path.join(build, "inkling"), "serve", "--model", model, "--slots", "1", "--ctx", "256",
              "--threads", "2"])
eng.frame()  # the info STATS

# Item 14 of issue 20: an id inside the padded vocabulary (201024 rows) but outside the
# tokenizer and the logits (200058) made token_text throw out_of_range outside any handler.
eng.send(b"SUBMIT r1 0 6 1 0 1 0 ids=1 logprobs=1\n200500\n")
frames = until_end(eng, "r1")
checks.report("an ids=1 id in the padded vocabulary but past the tokenizer is ERROR BAD_REQUEST, not a crash",
              [f.kind for f in frames] == ["ERROR"] and frames[0].fields[2] == "BAD_REQUEST"
              and "200500" in " ".join(frames[0].fields), [f.fields for f in frames])
serves_on(eng, "padded id")

# Item 17: a DMel byte above 15 is refused (the forward used to clamp it into level 15).
info_audio = 200023  # the demo model's <|audio|> id (STATS info audio_token)
ext = bytes([3] * 80)
ext = ext[:41] + b"\x10" + ext[42:]
eng.send(wire.submit("loud", 0, f"1 {info_audio}".encode(), 1, ext=ext, ids=1))
frames = until_end(eng, "loud")
checks.report("a DMel byte above 15 is ERROR AUDIO_MISMATCH naming the byte and its offset",
              [f.kind for f in frames] == ["ERROR"] and frames[0].fields[2] == "AUDIO_MISMATCH"
              and "byte 16 at offset 41" in " ".join(frames[0].fields), [f.fields for f in frames])
serves_on(eng, "DMel byte 16")

# Item 12: a CANCEL written right behind a 16 MiB SUBMIT takes effect before the next token
# of the request it cancels (the engine read 64 KiB of stdin a round: 256 rounds, 256 tokens).
# One write: the request, a 16 MiB SUBMIT (refused SLOT_BUSY once read) and the CANCEL.
eng.send(wire.submit("long", 0, b"1 2 3", 400, ids=1, reset=1) + wire.submit("big", 0, b"x" * (16 << 20), 1, ids=1)
         + wire.cancel("long"))
late = 0
ended = {}
while len(ended) < 2:
    f = eng.frame()
    if f.kind == "DATA" and f.fields[1] == "long":
        late += 1
    if f.kind in ("DONE", "ERROR") and f.fields[1] in ("long", "big"):
        ended[f.fields[1]] = f.fields[2] if f.kind == "ERROR" else "DONE"
checks.report(f"a CANCEL behind a 16 MiB SUBMIT ends the request within a round ({late} more tokens, at most 2)",
              ended.get("long") == "CANCELLED" and late <= 2, (ended, late))
serves_on(eng, "cancel behind a big frame")

checks.report("the engine exits 0 at EOF", eng.close() == 0)
sys.exit(checks.finish())
