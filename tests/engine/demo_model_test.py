#!/usr/bin/env python3
"""demo_model_test.py [BUILD]: the engine on the committed demo model (models/inkling-demo)
against the reference's golden (tests/fixtures/demo/inkling-demo.json, written by
tools/train-tiny/demo_goldens.py). Needs no torch: the golden carries the reference's
numbers. PASS/FAIL lines; exit 0 when all pass.

  - tokenizer: the engine (tokenize-cli) tokenizes heldout.txt and the chat prompt as the
    python trainer's tokenizer (tools/train-tiny/bpe.py) did
  - perplexity: `inkling eval` on heldout.txt within 1e-3 relative of the reference
  - greedy: `inkling run --ids PROMPT` gives the reference's greedy tokens, ending at the
    end-of-turn token (eos_token_id)
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
model = os.path.join(ROOT, "models", "inkling-demo")
golden = json.load(open(os.path.join(ROOT, "tests", "fixtures", "demo", "inkling-demo.json")))
checks = Checks("demo model")

heldout = open(os.path.join(model, "heldout.txt"), encoding="utf-8").read()
prompt = ("<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>"
          "<|message_user|><|content_text|>" + golden["prompt_text"] + "<|end_message|>"
          "<|message_model|><|content_text|>")
lines = json.dumps(heldout) + "\n" + json.dumps(prompt) + "\n"
out = subprocess.run([os.path.join(build, "tokenize-cli"), os.path.join(model, "tokenizer.json")],
                     input=lines.encode(), capture_output=True, check=True).stdout.decode().splitlines()
ids = json.loads(out[0])
checks.report("engine tokenizes heldout.txt as the python BPE trainer does", ids == golden["heldout_ids"],
              f"{len(ids)} vs {len(golden['heldout_ids'])} ids")
checks.report("engine tokenizes the chat prompt as the python BPE trainer does",
              json.loads(out[1]) == golden["prompt_ids"])

ev = json.loads(subprocess.run([os.path.join(build, "inkling"), "eval", "--model", model, "--text",
                                os.path.join(model, "heldout.txt"), "--ctx", str(golden["window"]),
                                "--threads", "2"], capture_output=True, check=True).stdout)
rel = abs(ev["perplexity"] - golden["perplexity"]) / golden["perplexity"]
checks.report(f"inkling eval perplexity {ev['perplexity']:.4f} equals the reference's {golden['perplexity']:.4f} "
              f"within 1e-3 relative", ev["tokens_scored"] == golden["tokens_scored"] and rel <= 1e-3,
              f"relative diff {rel:.2e}, tokens {ev['tokens_scored']}")

run = json.loads(subprocess.run([os.path.join(build, "inkling"), "run", "--model", model, "--ids",
                                 ",".join(map(str, golden["prompt_ids"])), "-n", "64", "--json",
                                 "--threads", "2"], capture_output=True, check=True).stdout)
checks.report("engine greedy continuation equals the reference's", run["tokens"] == golden["tokens"],
              f"{run['tokens']} vs {golden['tokens']}")
cfg = json.load(open(os.path.join(model, "config.json")))
checks.report("the chat turn ends at the end-of-turn token (eos_token_id)",
              run["tokens"][-1] == cfg["eos_token_id"] and len(run["tokens"]) < 64)
sys.exit(checks.finish())
