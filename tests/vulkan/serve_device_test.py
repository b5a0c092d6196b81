#!/usr/bin/env python3
"""The Vulkan chain behind `inkling serve` (lavapipe): a request runs on the device and
gives the CPU's tokens; with INKLING_VK_FAULT the device is lost mid-request, the request
still finishes with the same tokens, and the engine sends EVENT device_lost, then keeps
serving on the CPU. Prints PASS/FAIL lines (tests/run_all.sh counts them). Every read from
an engine has a deadline (tests/lib Engine: 120 s, then the engine is killed and it fails).

usage: serve_device_test.py BUILD_DIR"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import Checks, Engine  # noqa: E402

build = sys.argv[1]
model = os.path.join(build, "fixtures", "mixed-hf-f32")
checks = Checks("vulkan serve")


def start(vulkan, fault=None, experts="auto"):
    env = dict(os.environ)
    if fault is not None:
        env["INKLING_VK_FAULT"] = str(fault)
    return Engine([os.path.join(build, "inkling"), "serve", "--model", model, "--slots", "2", "--ctx", "256",
                   "--threads", "2", "--vulkan", vulkan, "--vk-experts", experts], env=env)


def request(eng, rid, slot, prompt, n):
    """Tokens of one greedy request, and every EVENT and STATS seen on the way."""
    eng.submit(rid, slot, prompt, n, ids=1)
    tokens, events, stats = [], [], []
    while True:
        f = eng.frame()
        if f.kind == "DATA":
            tokens.append(f.payload.decode().strip())
        elif f.kind == "EVENT":
            events.append(f.json())
        elif f.kind == "STATS":
            stats.append(f.json())
        elif f.kind == "DONE":
            break
        elif f.kind == "ERROR":
            raise RuntimeError(" ".join(f.fields))
    # The STATS after DONE.
    f = eng.frame()
    if f.kind == "STATS":
        stats.append(f.json())
    return tokens, events, stats


def main():
    prompt = "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9"
    cpu = start("off")
    want1, _, _ = request(cpu, "a", 0, prompt, 12)
    want2, _, _ = request(cpu, "b", 1, "2 7 1 8 2 8", 8)
    cpu.close()

    dev = start("on")
    got, events, stats = request(dev, "a", 0, prompt, 12)
    checks.report(f"the chain gives the CPU's tokens ({' '.join(got)})", got == want1)
    checks.report("no EVENT when nothing is lost", not events)
    last = stats[-1] if stats else {}
    checks.report("STATS carries the device's figures: " + json.dumps(last.get("device", {}))[:160],
                  last.get("device", {}).get("mode") == "vulkan" and last["device"].get("frames", 0) > 0)
    dev.close()

    # Routed experts on the host: frames in the prompt's step: 5 layers (3 MoE: A1 + A2) + the
    # last frame = 9; a loss at frame 4 is mid-prefill, at 40 mid-decode. Resident experts
    # (the default): one frame a step; a loss at frame 1 is the prefill, at 6 mid-decode.
    for experts, fault in (("off", 4), ("off", 40), ("auto", 1), ("auto", 6)):
        dev = start("on", fault, experts)
        got, events, _ = request(dev, "a", 0, prompt, 12)
        what = f"device lost at frame {fault} (--vk-experts {experts})"
        checks.report(f"{what}: same tokens", got == want1)
        checks.report(f"{what}: one EVENT device_lost ({json.dumps(events)[:120]})",
                      len(events) == 1 and events[0].get("kind") == "device_lost"
                      and "device lost" in events[0].get("detail", ""))
        got2, events2, stats2 = request(dev, "b", 1, "2 7 1 8 2 8", 8)
        checks.report(f"{what}: the next request runs on the CPU", got2 == want2 and not events2)
        checks.report(f"{what}: STATS says cpu", stats2[-1].get("device", {}).get("mode") == "cpu")
        dev.close()

    # The resident mode's figures: every MoE layer's experts on the device, one wait a step.
    dev = start("on")
    got, _, stats = request(dev, "a", 0, prompt, 12)
    d = stats[-1].get("device", {}) if stats else {}
    ex = stats[-1].get("experts", {}) if stats else {}
    tiers = [int(ex.get("map", "")[i:i + 2], 16) >> 6 for i in range(0, len(ex.get("map", "")), 2)]
    checks.report(f"resident experts: the residency map puts every expert on the device "
                  f"({ex.get('device')} of {ex.get('total')})",
                  ex.get("total", 0) > 0 and ex.get("device") == ex.get("total") and tiers and all(t == 2 for t in tiers))
    checks.report(f"resident experts: the CPU's tokens, {d.get('expert_layers')} MoE layers resident, "
                  f"{d.get('waits_per_step')} waits a step",
                  got == want1 and d.get("expert_layers", 0) > 0 and d.get("waits_per_step") == 1.0
                  and d.get("host_pairs") == 0 and d.get("device_pairs", 0) > 0)
    dev.close()
    dev = start("on", experts="off")
    got, _, stats = request(dev, "a", 0, prompt, 12)
    d = stats[-1].get("device", {}) if stats else {}
    ex = stats[-1].get("experts", {}) if stats else {}
    checks.report(f"--vk-experts off: no expert on the device in the residency map ({ex.get('device')})",
                  ex.get("device") == 0 and ex.get("total", 0) > 0)
    checks.report(f"--vk-experts off: the CPU's tokens, routed pairs on the host ({d.get('host_pairs')})",
                  got == want1 and d.get("expert_layers") == 0 and d.get("device_pairs") == 0
                  and d.get("host_pairs", 0) > 0)
    dev.close()


try:
    main()
except (RuntimeError, TimeoutError, EOFError) as e:
    # An engine that failed to start, went silent past its deadline (tests/lib: it is killed)
    # or died: the checks not reached are lost, and this says why.
    checks.report("the suite ran to its end", False, e)
sys.exit(checks.finish())
