#!/usr/bin/env python3
"""The Vulkan chain's figures in the gateway's /metrics (#14 item 5), end to end on lavapipe:
the trained demo model behind build/inkling-gateway with --engine-arg=--vulkan=on, one chat
request, then /metrics carries, with the model label, what the engine's last STATS (as
/v1/stats shows it) says under `device`: memory used and budget, the expert tier's bytes and
resident layers, the layers with slots, the slots and the tier's uploads and evictions, routed
pairs on the device and on the host, steps, frames and waits a step.
On the CPU (--vulkan off) none of those families is written.

usage: gateway_device_metrics_e2e.py BUILD_DIR"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway  # noqa: E402
from lib.scrape import prometheus  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
DEMO = os.path.join(ROOT, "models", "inkling-demo")
DEADLINE = 60
checks = Checks("vulkan gateway metrics")
report = checks.report

# /metrics family → the STATS field under `device` it carries.
FIGURES = {
    "inkling_device_memory_used_bytes": "memory_used",
    "inkling_device_memory_budget_bytes": "memory_budget",
    "inkling_device_expert_bytes": "expert_bytes",
    "inkling_device_expert_layers": "expert_layers",
    "inkling_device_tier_layers": "tier_layers",
    "inkling_device_tier_slots": "tier_slots",
    "inkling_device_tier_uploads_total": "tier_uploads",
    "inkling_device_tier_evictions_total": "tier_evictions",
    "inkling_device_expert_pairs_total": "device_pairs",
    "inkling_host_expert_pairs_total": "host_pairs",
    "inkling_device_streamed_experts_total": "tier_streamed",
    "inkling_device_streamed_pairs_total": "stream_pairs",
    "inkling_device_steps_total": "steps",
    "inkling_device_frames_per_step": "frames_per_step",
    "inkling_device_waits_per_step": "waits_per_step",
}


def gateway(vulkan):
    return Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", f"demo={DEMO}", "--ctx", "512",
                    "--threads", "2", "--slots", "1", f"--engine-arg=--vulkan={vulkan}"], ready_timeout=DEADLINE)


def scrape(g):
    st, body, _ = g.request("GET", "/metrics", timeout=DEADLINE)
    m = prometheus(body.decode()) if st == 200 else {}
    st2, stats, _ = g.request("GET", "/v1/stats", timeout=DEADLINE)
    device = json.loads(stats)["models"]["demo"]["engine"]["stats"].get("device", {}) if st2 == 200 else {}
    return m, device


def chat(g):
    body = {"model": "demo", "max_tokens": 6, "temperature": 0,
            "messages": [{"role": "user", "content": "Tell me a story."}]}
    st, _, _ = g.request("POST", "/v1/chat/completions", body, timeout=DEADLINE)
    return st


g = gateway("on")
try:
    report("a chat request through the gateway on the device answers 200", chat(g) == 200, g.log_tail())
    # The engine sends STATS on its own schedule: wait (with a deadline) until the last one
    # counts the request's steps and /metrics, read after it, carries the same figures.
    deadline, m, device = time.time() + DEADLINE, {}, {}
    while time.time() < deadline:
        m, device = scrape(g)
        got = {f: m.get((f, (("model", "demo"),))) for f in FIGURES}
        if device.get("steps", 0) > 0 and all(got[f] == device.get(k) for f, k in FIGURES.items()):
            break
        time.sleep(0.2)
    got = {f: m.get((f, (("model", "demo"),))) for f in FIGURES}
    report("/metrics carries the device's STATS figures with the model label: "
           + ", ".join(f"{f.removeprefix('inkling_')}={got[f]}" for f in FIGURES),
           device.get("mode") == "vulkan" and all(got[f] == device.get(k) for f, k in FIGURES.items()),
           (got, device))
    report("the demo model's experts are resident on the device: expert bytes and pairs there, none on the host, "
           "one wait a step",
           (got["inkling_device_expert_bytes"] or 0) > 0 and (got["inkling_device_expert_layers"] or 0) > 0
           and (got["inkling_device_expert_pairs_total"] or 0) > 0 and got["inkling_host_expert_pairs_total"] == 0
           and got["inkling_device_waits_per_step"] == 1, got)
finally:
    g.stop()

g = gateway("off")
try:
    report("on the CPU: a chat request answers 200", chat(g) == 200, g.log_tail())
    m, device = scrape(g)
    report("on the CPU /metrics writes none of the device families (STATS device mode cpu)",
           not any(name in FIGURES for name, _ in m) and device.get("mode") in (None, "cpu"), (device, sorted(m)[:5]))
finally:
    g.stop()

sys.exit(checks.finish())
