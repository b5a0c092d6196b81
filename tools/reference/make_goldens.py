"""Writes the golden outputs the engine tests compare against: for every tiny fixture, the
reference's prompt ids, greedy tokens, teacher-forced argmax and last-position logits.

    /usr/bin/python3 tools/reference/make_goldens.py FIXTURE_DIR GOLDEN_DIR      (make oracle)
    /usr/bin/python3 tools/reference/make_goldens.py FIXTURE_DIR GOLDEN_DIR --check
        re-runs the reference and compares with the committed goldens (PASS/FAIL lines)
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests"))
from lib import Checks  # noqa: E402

GENERATE = 32


def reference(fixture_dir):
    meta = json.load(open(os.path.join(fixture_dir, "make_tiny.json")))
    ids = ",".join(map(str, meta["suggested_prompt"]))
    cmd = [sys.executable, os.path.join(HERE, "inkling_ref.py"), "--model", fixture_dir, "--ids", ids,
           "-n", str(GENERATE)]
    if meta.get("sample_dmel"):
        cmd += ["--audio", os.path.join(fixture_dir, meta["sample_dmel"])]
    out = json.loads(subprocess.check_output(cmd))
    return {"fixture": os.path.basename(fixture_dir), "generate": GENERATE,
            "audio": meta.get("sample_dmel"), "prompt_ids": out["prompt_ids"], "tokens": out["tokens"],
            "prompt_argmax": out["prompt_argmax"], "last_logits": out["last_logits"],
            "prompt_nll": out["prompt_nll"], "prompt_nll_tokens": out["prompt_nll_tokens"]}


def main():
    fixtures, goldens = sys.argv[1], sys.argv[2]
    check = "--check" in sys.argv[3:]
    checks = Checks("reference goldens")
    for name in sorted(os.listdir(fixtures)):
        fx = os.path.join(fixtures, name)
        if not os.path.isfile(os.path.join(fx, "make_tiny.json")):
            continue
        got = reference(fx)
        path = os.path.join(goldens, name + ".json")
        if not check:
            with open(path, "w") as f:
                json.dump(got, f)
                f.write("\n")
            print(f"wrote {path}")
            continue
        want = json.load(open(path))
        diff = max(abs(a - b) for a, b in zip(got["last_logits"], want["last_logits"]))
        same = all(got[k] == want[k] for k in ("prompt_ids", "tokens", "prompt_argmax"))
        nll_ok = abs(got["prompt_nll"] - want["prompt_nll"]) <= 1e-6 * max(1.0, abs(want["prompt_nll"]))
        checks.report(f"reference still gives golden {name}", same and diff <= 1e-5 and nll_ok,
                      f"ids/tokens/argmax equal={same}, max logit diff {diff:.2e}")
    return checks.finish() if check else 0


if __name__ == "__main__":
    sys.exit(main())
