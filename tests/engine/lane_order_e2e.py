#!/usr/bin/env python3
"""Integer weights in the lane order (--lane-order, engine/model/lane_order.h), end to end on a
model wide enough to have full groups of 16 blocks (hidden 544, expert width 1,056, dense
width 1,024), converted with int8 dense matrices and int8 routed experts, and with int4g64
dense matrices and int4 experts:

  - `inkling eval` scores the same NLL to the last bit with --lane-order off, auto (the
    default) on copied weights, auto on mapped weights (experts packed, dense matrices not),
    and (against its own run with off) --isa avx2; `inkling run` gives the same greedy tokens
  - the load log says what was packed: on a CPU with AVX-512 VNNI, the copied safetensors'
    integer tensors and the experts the cache keeps; nothing with off, --isa avx2, or on a
    CPU without VNNI; through a 2-slot cache (records evicted in turn, left unpacked) the
    same NLL
  - the same model with int8 or int4 experts only (f32 dense) on the Vulkan device (lavapipe
    in CI): the experts' rows go up in column order, so the device gives the tokens it gives
    with --lane-order off
  - a bad --lane-order value is refused, naming the flag

usage: lane_order_e2e.py BUILD_DIR"""
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
IDS = "3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3,2,3,8,4,6,2,6,4,3,3,8,3,2,7,9,5"
checks = Checks("lane order")
report = checks.report


def cpu_has_vnni():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return all(x in flags for x in ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"))


def eval_nll(model, *flags):
    p = subprocess.run([INKLING, "eval", "--model", model, "--ids", IDS, "--threads", "2", *flags],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"eval {' '.join(flags)}: {p.stderr[-2000:]}")
    return json.loads(p.stdout)["nll"], p.stderr


def run(model, *flags):
    p = subprocess.run([INKLING, "run", "--model", model, "--ids", IDS, "-n", "8", "--threads", "2",
                        "--usage-file", "off", *flags], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout.split(), p.stderr


tmp = tempfile.mkdtemp(prefix="lane-order-")
try:
    src = os.path.join(tmp, "wide")
    subprocess.run([sys.executable, MAKE_TINY, src, "--geometry", "base", "--set", "D=544", "--set", "moe_inter=1056",
                    "--set", "dense_inter=1024", "--set", "E=4"], check=True, capture_output=True)
    vnni = cpu_has_vnni()
    packed_line, experts_line = "integer weight tensors in the lane order", "integer experts in the lane order"
    for fmt, dense in (("int8", "int8"), ("int4", "int4g64")):
        model = os.path.join(tmp, f"wide-{fmt}")
        subprocess.run([INKLING, "convert", src, model, "--experts", fmt, "--dense", dense], check=True,
                       capture_output=True)
        want, log_off = eval_nll(model, "--lane-order", "off")
        got, log = eval_nll(model, "--load-weights", "copy")
        report(f"{fmt}: eval gives the same NLL in the lane order as with --lane-order off ({got!r})", got == want,
               (got, want))
        report(f"{fmt}: load log: " + ("the copied tensors and the experts packed" if vnni else "nothing packed (no VNNI)"),
               (packed_line in log and experts_line in log) == vnni and packed_line not in log_off
               and experts_line not in log_off, log[-600:])
        # A cache of 2 slots of 4 experts (nothing pinned without a usage history): records read
        # and evicted in turn stay in column order beside the packed dense matrices.
        got, log = eval_nll(model, "--load-weights", "copy", "--cap", "2", "--usage-file", "off")
        report(f"{fmt}: eval through a 2-slot expert cache (experts unpacked, dense packed): the same NLL",
               got == want and (packed_line in log) == vnni, (got, want, log[-400:]))
        got, log = eval_nll(model, "--load-weights", "map")
        report(f"{fmt}: eval on mapped weights (dense in column order, experts packed): the same NLL",
               got == want and packed_line not in log and (experts_line in log) == vnni, (got, want, log[-400:]))
        # (AVX2's float kernels round differently from AVX-512's: its own NLL, the same either way.)
        want2, _ = eval_nll(model, "--load-weights", "copy", "--isa", "avx2", "--lane-order", "off")
        got, log = eval_nll(model, "--load-weights", "copy", "--isa", "avx2")
        report(f"{fmt}: eval with --isa avx2: nothing packed, its NLL as with --lane-order off", got == want2
               and packed_line not in log and experts_line not in log, (got, want2, log[-400:]))
        rc0, t0, _ = run(model, "--lane-order", "off")
        rc1, t1, e1 = run(model)
        report(f"{fmt}: run gives the same greedy tokens either way ({' '.join(t1)})",
               rc0 == 0 and rc1 == 0 and t0 == t1 and len(t1) == 8, (rc0, rc1, t0, t1, e1[-400:]))

        # The experts alone quantized (f32 dense, which the chain takes) on the device: uploaded
        # in column order, so the device gives the tokens it gives when nothing was packed.
        experts_only = os.path.join(tmp, f"wide-experts-{fmt}")
        subprocess.run([INKLING, "convert", src, experts_only, "--experts", fmt], check=True, capture_output=True)
        runs = []
        for flags in ((), ("--lane-order", "off")):
            eng = Engine([INKLING, "serve", "--model", experts_only, "--slots", "1", "--ctx", "256", "--threads", "2",
                          "--vulkan", "on", *flags])
            try:
                r = run_request(eng, "a", 0, IDS.replace(",", " "), 8, ids=1)
                log = eng.log_tail(20000)
            finally:
                eng.close()
            d = r.last_stats().get("device", {}) if r.done else {}
            runs.append(([str(t) for t in r.tokens] if r.done else [], d, log))
        (got, d, log), (want, _, log_off) = runs
        report(f"{fmt} experts on the Vulkan device ({d.get('device_pairs', 0)} pairs there): the tokens of the run "
               f"with --lane-order off ({' '.join(got)})",
               len(got) == 8 and got == want and d.get("device_pairs", 0) > 0 and d.get("expert_format") == fmt
               and (experts_line in log) == vnni and experts_line not in log_off, (got, want, d, log[-600:]))

    rc, _, err = run(os.path.join(tmp, "wide-int8"), "--lane-order", "bogus")
    report("--lane-order bogus: refused, naming the flag", rc != 0 and "--lane-order" in err, (rc, err[-300:]))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(checks.finish())
