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

# Issue 15 item 5: data_logprobs=K gives the DATA tails logprobs=K gives (the same tokens,
# log-probs and alternatives at temperature 0), no ECHO, and each alternative's bytes after the
# token's own in the payload, as tid tlp len (PROTOCOL.md 6.3).
eng.submit("lp1", 0, b"1 2 3", 4, ids=1, logprobs=3, reset=1)
scored = [f for f in until_end(eng, "lp1") if f.kind == "DATA"]
eng.submit("lp2", 0, b"1 2 3", 4, ids=1, data_logprobs=3, reset=1)
both = until_end(eng, "lp2")
tails = [f for f in both if f.kind == "DATA"]


def same_tail(a, b):
    """a: logprobs=K's DATA (tid tlp pairs); b: data_logprobs=K's (tid tlp len triples)."""
    k = int(a.fields[4])
    if b.fields[3:5] != a.fields[3:5] or len(b.fields) != 5 + 3 * k:
        return False
    lens = [int(b.fields[7 + 3 * i]) for i in range(k)]
    alternatives = [(b.fields[5 + 3 * i], b.fields[6 + 3 * i]) for i in range(k)]
    own = len(b.payload) - sum(lens)
    return alternatives == [(a.fields[5 + 2 * i], a.fields[6 + 2 * i]) for i in range(k)] and b.payload[:own] == a.payload


checks.report("data_logprobs=3: the tails of logprobs=3 with the alternatives' bytes, and no ECHO",
              len(tails) == len(scored) > 0 and all(same_tail(a, b) for a, b in zip(scored, tails))
              and not any(f.kind == "ECHO" for f in both) and both[-1].kind == "DONE",
              [(f.fields, f.payload) for f in both][:3])
eng.submit("lp3", 0, b"1 2 3", 1, ids=1, logprobs=1, data_logprobs=1)
frames = until_end(eng, "lp3")
checks.report("logprobs and data_logprobs together are BAD_REQUEST",
              [f.kind for f in frames] == ["ERROR"] and frames[0].fields[2] == "BAD_REQUEST", [f.fields for f in frames])
serves_on(eng, "data_logprobs")

checks.report("the engine exits 0 at EOF", eng.close() == 0)
sys.exit(checks.finish())
