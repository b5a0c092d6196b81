#!/usr/bin/env python3
"""The Vulkan chain behind `inkling serve` (lavapipe): a request runs on the device and
gives the CPU's tokens; with INKLING_VK_FAULT the device is lost mid-request, the request
still finishes with the same tokens, and the engine sends EVENT device_lost, then keeps
serving on the CPU. Prints PASS/FAIL lines (tests/run_all.sh counts them).

usage: serve_device_test.py BUILD_DIR"""
import json
import os
import subprocess
import sys

build = sys.argv[1]
model = os.path.join(build, "fixtures", "mixed-hf-f32")
READY = b"\x01\x01READY\x01\x01\n"
failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    failures += 0 if ok else 1


class Engine:
    def __init__(self, vulkan, fault=None):
        env = dict(os.environ)
        if fault is not None:
            env["INKLING_VK_FAULT"] = str(fault)
        self.p = subprocess.Popen(
            [os.path.join(build, "inkling"), "serve", "--model", model, "--slots", "2", "--ctx", "256",
             "--threads", "2", "--vulkan", vulkan],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        line = self.p.stdout.readline()
        assert line == READY, line

    def frame(self):
        """One engine frame: (kind, fields, payload)."""
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise EOFError(self.p.stderr.read().decode(errors="replace")[-2000:])
            fields = line.rstrip(b"\n").decode().split()
            if fields:
                break
        kind = fields[0]
        payload = None
        if kind in ("DATA", "ECHO"):
            payload = self.p.stdout.read(int(fields[2]) + 1)[:-1]
        elif kind in ("STATS", "EVENT"):
            payload = json.loads(self.p.stdout.read(int(fields[1]) + 1)[:-1])
        return kind, fields, payload

    def request(self, rid, slot, prompt, n):
        """Tokens of one greedy request, and every EVENT and STATS seen on the way."""
        body = prompt.encode()
        self.p.stdin.write(f"SUBMIT {rid} {slot} {len(body)} {n} 0 1 0 ids=1\n".encode() + body + b"\n")
        self.p.stdin.flush()
        tokens, events, stats = [], [], []
        while True:
            kind, fields, payload = self.frame()
            if kind == "DATA":
                tokens.append(payload.decode().strip())
            elif kind == "EVENT":
                events.append(payload)
            elif kind == "STATS":
                stats.append(payload)
            elif kind == "DONE":
                break
            elif kind == "ERROR":
                raise RuntimeError(" ".join(fields))
        # The STATS after DONE.
        kind, _, payload = self.frame()
        if kind == "STATS":
            stats.append(payload)
        return tokens, events, stats

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


prompt = "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9"
cpu = Engine("off")
want1, _, _ = cpu.request("a", 0, prompt, 12)
want2, _, _ = cpu.request("b", 1, "2 7 1 8 2 8", 8)
cpu.close()

dev = Engine("on")
got, events, stats = dev.request("a", 0, prompt, 12)
check(got == want1, f"the chain gives the CPU's tokens ({' '.join(got)})")
check(not events, "no EVENT when nothing is lost")
last = stats[-1] if stats else {}
check(last.get("device", {}).get("mode") == "vulkan" and last["device"].get("frames", 0) > 0,
      "STATS carries the device's figures: " + json.dumps(last.get("device", {}))[:160])
dev.close()

# Frames in the prompt's step: 5 layers (3 MoE: A1 + A2) + the last frame = 9; a loss at
# frame 4 is mid-prefill, at 40 mid-decode.
for fault in (4, 40):
    dev = Engine("on", fault)
    got, events, _ = dev.request("a", 0, prompt, 12)
    check(got == want1, f"device lost at frame {fault}: same tokens")
    check(len(events) == 1 and events[0].get("kind") == "device_lost" and "device lost" in events[0].get("detail", ""),
          f"device lost at frame {fault}: one EVENT device_lost ({json.dumps(events)[:120]})")
    got2, events2, stats2 = dev.request("b", 1, "2 7 1 8 2 8", 8)
    check(got2 == want2 and not events2, f"device lost at frame {fault}: the next request runs on the CPU")
    check(stats2[-1].get("device", {}).get("mode") == "cpu", f"device lost at frame {fault}: STATS says cpu")
    dev.close()

sys.exit(1 if failures else 0)
