#!/usr/bin/env python3
"""The documented Vulkan flags and declines of `inkling` (docs/vulkan.md), end to end on the
real driver (lavapipe in CI), each against the CPU run of the same model (--vulkan off):

  - --vulkan auto (the default) and --vulkan prompts: off on a CPU driver, with the line that
    says so (on a GPU: the chain; prompts leaves decode to the CPU); the CPU's tokens
  - --vk-device N: the device at N; an index past the devices is an error naming the range
  - --vk-budget-mb N: the budget STATS reports; a partial chain (lm_head on the host) when the
    layers don't all fit, the CPU's tokens; no layer fitting is an error under --vulkan on
  - --vk-layers N: N layers on the device, the CPU runs the rest, the CPU's tokens
  - each decline (head dim > 256, bias rank > 64, conv > 9 taps, int8 dense matrices): an
    error naming the reason under --vulkan on, the CPU under auto; the same geometry at the
    limit (256, 64, 9) is taken by the chain and gives the CPU's tokens
  - a converted model's int8 and int4 routed experts resident on the device (STATS: the
    quantized bytes, the format, every pair on the device), the CPU run's tokens; with
    --vk-experts off the big-model case: experts streamed from experts.inkx through a RAM
    cache of 2 slots, the dense part on the device, the tokens of the CPU run

usage: vulkan_flags_e2e.py BUILD_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Engine  # noqa: E402
from lib.engine_requests import run_request  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
INKLING = os.path.join(build, "inkling")
MAKE_TINY = os.path.join(ROOT, "tools", "make-tiny", "make_tiny.py")
MIXED = os.path.join(build, "fixtures", "mixed-hf-f32")
PROMPT = "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9"
checks = Checks("vulkan flags")
report = checks.report


def serve(model, *flags):
    return Engine([INKLING, "serve", "--model", model, "--slots", "1", "--ctx", "256", "--threads", "2", *flags])


def greedy(model, *flags, n=12):
    """Tokens of one greedy request, the STATS after it, and the engine's stderr."""
    eng = serve(model, *flags)
    try:
        r = run_request(eng, "a", 0, PROMPT, n, ids=1)
        log = eng.log_tail(20000)
    finally:
        eng.close()
    if not r.done:
        raise RuntimeError(f"{' '.join(flags)}: {r.end.fields}; stderr: {log}")
    return r.tokens, r.last_stats(), log


def run(model, *flags):
    """`inkling run` with 8 greedy tokens: (exit status, tokens, stderr)."""
    p = subprocess.run([INKLING, "run", "--model", model, "--ids", PROMPT.replace(" ", ","), "-n", "8",
                        "--threads", "2", "--usage-file", "off", *flags], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout.split(), p.stderr


def make_fixture(path, geometry, *sets):
    args = [sys.executable, MAKE_TINY, path, "--geometry", geometry]
    for s in sets:
        args += ["--set", s]
    subprocess.run(args, check=True, capture_output=True)
    return path


def convert(src, dst, *flags):
    subprocess.run([INKLING, "convert", src, dst, *flags], check=True, capture_output=True)
    return dst


def dev(stats):
    return stats.get("device", {})


tmp = tempfile.mkdtemp(prefix="vulkan-flags-")
try:
    want, cpu_stats, _ = greedy(MIXED, "--vulkan", "off")
    report("--vulkan off: STATS says cpu", dev(cpu_stats).get("mode") == "cpu", dev(cpu_stats))

    # What the loader offers: --vulkan on takes it whatever it is.
    got, st, log = greedy(MIXED, "--vulkan", "on")
    d = dev(st)
    report(f"--vulkan on: the chain runs ({d.get('name')}, {d.get('type')}), the CPU's tokens",
           got == want and d.get("mode") == "vulkan" and d.get("steps", 0) > 0 and "[vulkan] ready:" in log,
           (got, want, d))
    cpu_driver = d.get("type") == "cpu"

    # -- auto and prompts -------------------------------------------------------------------
    for flags in ((), ("--vulkan", "auto"), ("--vulkan", "prompts")):
        what = " ".join(flags) or "no --vulkan (auto)"
        got, st, log = greedy(MIXED, *flags)
        d = dev(st)
        if cpu_driver:
            report(f"{what} on a CPU driver: off, one line says why, the CPU's tokens",
                   got == want and d.get("mode") == "cpu" and "[vulkan] off: no GPU" in log
                   and "is a CPU driver" in log and "[vulkan] ready" not in log, (got, d, log[-400:]))
        elif "prompts" in flags:
            # One prompt step on the device; the 11 decode steps after it on the CPU.
            report(f"{what} on a GPU: the prompt step on the device, decode on the CPU, the CPU's tokens",
                   got == want and d.get("mode") == "vulkan" and d.get("steps") == 1, (got, d))
        else:
            report(f"{what} on a GPU: every step on the device, the CPU's tokens",
                   got == want and d.get("mode") == "vulkan" and d.get("steps") == 12, (got, d))

    # -- --vk-device -----------------------------------------------------------------------
    rc, _, err = run(MIXED, "--vulkan", "on", "--vk-device", "99")
    report("--vk-device past the last device: an error naming the devices there are",
           rc == 1 and "--vk-device 99: there are" in err, (rc, err[-300:]))
    count = int(err.split("there are ")[1].split()[0]) if "there are " in err else 0
    names = []
    for i in range(count):
        got, st, log = greedy(MIXED, "--vulkan", "on", "--vk-device", str(i))
        names.append(dev(st).get("name"))
        report(f"--vk-device {i}: the chain runs on that device ({dev(st).get('name')}), the CPU's tokens",
               got == want and dev(st).get("mode") == "vulkan" and f"[vulkan] ready: {dev(st).get('name')}" in log,
               (got, dev(st)))

    # -- --vk-budget-mb and --vk-layers --------------------------------------------------------
    # Layers of a few MiB each (D=512): 8 MiB holds some of them, never all with lm_head.
    wide = make_fixture(os.path.join(tmp, "wide"), "base", "D=512", "dense_inter=512")
    wide_cpu, _, _ = greedy(wide, "--vulkan", "off")
    got, st, log = greedy(wide, "--vulkan", "on", "--vk-budget-mb", "8")
    d = dev(st)
    report(f"--vk-budget-mb 8: the budget is 8 MiB, {d.get('layers')} of 6 layers fit, lm_head on the host, "
           f"the CPU's tokens",
           got == wide_cpu and d.get("memory_budget") == 8 << 20 and d.get("memory_used", 1 << 40) <= 8 << 20
           and 1 <= d.get("layers", 0) < 6 and d.get("lm_head") is False and d.get("steps", 0) > 0, (got, d))
    got, st, _ = greedy(wide, "--vulkan", "on")
    report("without --vk-budget-mb every layer and lm_head fit the driver's budget",
           got == wide_cpu and dev(st).get("layers") == 6 and dev(st).get("lm_head") is True
           and dev(st).get("memory_budget", 0) > 8 << 20, dev(st))
    rc, _, err = run(wide, "--vulkan", "on", "--vk-budget-mb", "1")
    report("--vk-budget-mb 1 (not one layer fits) under --vulkan on: an error naming the budget",
           rc == 1 and "not one layer fits the device budget of 1 MiB" in err, (rc, err[-300:]))
    for n in (1, 3):
        got, st, _ = greedy(MIXED, "--vulkan", "on", "--vk-layers", str(n))
        d = dev(st)
        report(f"--vk-layers {n}: {n} of 5 layers on the device, lm_head on the host, the CPU's tokens",
               got == want and d.get("layers") == n and d.get("lm_head") is False and d.get("steps", 0) > 0,
               (got, want, d))

    # -- declines ----------------------------------------------------------------------------
    dense8 = convert(os.path.join(build, "fixtures", "base-hf-f32"), os.path.join(tmp, "dense8"),
                     "--experts", "int8", "--dense", "int8")
    declines = [("head dim", make_fixture(os.path.join(tmp, "hd272"), "base", "hd=272"),
                 make_fixture(os.path.join(tmp, "hd256"), "base", "hd=256"), "head dim 272 > 256"),
                ("bias rank", make_fixture(os.path.join(tmp, "drel72"), "base", "d_rel=72"),
                 make_fixture(os.path.join(tmp, "drel64"), "base", "d_rel=64"), "relative-bias rank 72 > 64"),
                ("conv taps", make_fixture(os.path.join(tmp, "conv10"), "base", "conv_k=10"),
                 make_fixture(os.path.join(tmp, "conv9"), "base", "conv_k=9"), "short conv of 10 taps > 9"),
                ("int8 dense", dense8, convert(os.path.join(build, "fixtures", "base-hf-f32"),
                                               os.path.join(tmp, "keep"), "--experts", "int8"),
                 "is I8 (the shaders read F32 and BF16)")]
    for what, over, at_limit, reason in declines:
        rc_off, cpu_tokens, _ = run(over, "--vulkan", "off")
        rc, _, err = run(over, "--vulkan", "on")
        report(f"decline ({what}): --vulkan on is an error naming it ('{reason}')",
               rc_off == 0 and rc == 1 and f"--vulkan on: the chain declines this model: " in err and reason in err,
               (rc_off, rc, err[-300:]))
        rc, tokens, err = run(over, "--vulkan", "auto")
        off_line = "[vulkan] off: no GPU" if cpu_driver else f"[vulkan] off: the chain declines this model: "
        report(f"decline ({what}): --vulkan auto runs on the CPU with one off line, the CPU's tokens",
               rc == 0 and tokens == cpu_tokens and len(cpu_tokens) == 8 and off_line in err
               and (cpu_driver or reason in err), (rc, tokens, cpu_tokens, err[-300:]))
        rc_off, cpu_tokens, _ = run(at_limit, "--vulkan", "off")
        rc, tokens, err = run(at_limit, "--vulkan", "on")
        report(f"decline ({what}): the model at the limit runs on the device with the CPU's tokens",
               rc_off == 0 and rc == 0 and tokens == cpu_tokens and "[vulkan] ready:" in err,
               (rc, tokens, cpu_tokens, err[-300:]))

    # -- a converted model's int8/int4 experts on the device, and through the cache ----------
    _, f32_st, _ = greedy(MIXED, "--vulkan", "on")
    f32_bytes = dev(f32_st).get("expert_bytes", 0)
    cache = ("--cap", "2", "--pin-experts", "0", "--usage-file", "off")
    for fmt, ratio in (("int8", 2.5), ("int4", 4.5)):
        conv = convert(MIXED, os.path.join(tmp, f"mixed-{fmt}"), "--experts", fmt)
        cpu_tokens, _, _ = greedy(conv, "--vulkan", "off", *cache)
        got, st, log = greedy(conv, "--vulkan", "on", *cache)
        d = dev(st)
        report(f"converted model, {fmt} experts resident on the device: the CPU run's tokens ({len(got)}), "
               f"{d.get('device_pairs')} pairs on the device, none on the host",
               got == cpu_tokens and len(got) == 12 and d.get("expert_layers") == 3 and d.get("host_pairs") == 0
               and d.get("device_pairs", 0) > 0 and d.get("expert_format") == fmt, (got, cpu_tokens, d))
        report(f"converted model, {fmt}: STATS expert_bytes is the quantized size "
               f"({d.get('expert_bytes')} vs {f32_bytes} for the f32 experts, >= {ratio}x fewer)",
               0 < d.get("expert_bytes", 0) and d.get("expert_bytes", 0) * ratio <= f32_bytes, (d, f32_bytes))
        if fmt != "int8":
            continue
        # --vk-experts off: the big-model case, experts streamed from disk through the RAM cache.
        got, st, log = greedy(conv, "--vulkan", "on", "--vk-experts", "off", *cache)
        d, ec = dev(st), st.get("expert_cache", {})
        report(f"converted model, --vk-experts off: dense layers on the device ({d.get('steps')} steps, "
               f"{d.get('layers')} layers), routed pairs on the host ({d.get('host_pairs')}), the CPU's tokens",
               got == cpu_tokens and d.get("mode") == "vulkan" and d.get("layers") == 5 and d.get("steps") == 12
               and d.get("host_pairs", 0) > 0 and d.get("device_pairs") == 0 and d.get("expert_layers") == 0, d)
        report(f"converted model, --vk-experts off: experts read from disk through the cache "
               f"(cap {ec.get('cap')}, {ec.get('misses')} misses, {ec.get('bytes_read')} bytes)",
               ec.get("cap") == 2 and ec.get("misses", 0) > 0 and ec.get("bytes_read", 0) > 0
               and "[experts] expert cache: cap 2" in log, (ec, log[-500:]))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(checks.finish())
