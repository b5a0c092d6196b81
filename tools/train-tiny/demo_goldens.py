#!/usr/bin/python3
"""The reference's numbers for the committed demo model, which the engine tests compare with.

    /usr/bin/python3 tools/train-tiny/demo_goldens.py            writes the golden JSON
    /usr/bin/python3 tools/train-tiny/demo_goldens.py --check    recomputes, PASS/FAIL lines
    ... [--model DIR] [--golden FILE]

Golden (tests/fixtures/demo/inkling-demo.json):
  heldout_ids       bpe.py's tokenization of models/inkling-demo/heldout.txt
  nll, perplexity   tools/reference (float32 on the bf16 weights), teacher-forced in windows
                    of `window` tokens from a fresh state — what `inkling eval --ctx` does
  prompt_ids, tokens  a TMLv0 chat prompt and the reference's greedy continuation (it ends
                    at the end-of-turn token, eos_token_id)
Needs python3-torch; the tokenizer half also python3-regex (without it: a SKIP line, and a FAIL under CI=true).
"""

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import torch  # noqa: E402

import corpus  # noqa: E402
import inkling_ref  # noqa: E402
from lib import Checks  # noqa: E402

WINDOW = 512
PROMPT = "Tell me a fortune about cats."
GENERATE = 64


def chat_prompt(text):
    """protocol/tml_render at effort 0: the answer's <|content_text|> is already open."""
    return corpus.SYSTEM + corpus.USER + text + corpus.END + corpus.MODEL


def tokenizer(model_dir):
    try:
        import bpe
    except ImportError:
        return None
    return bpe.Tokenizer.load(os.path.join(model_dir, "tokenizer.json"))


def windows_nll(model, ids, window):
    nll, n = 0.0, 0
    for start in range(0, len(ids) - 1, window):
        seg = ids[start:start + window]
        if len(seg) < 2:
            break
        logp = torch.log_softmax(model.forward_full(seg).to(torch.float64), dim=-1)
        nll -= float(logp[torch.arange(len(seg) - 1), torch.tensor(seg[1:])].sum())
        n += len(seg) - 1
    return nll, n


def compute(model_dir, want):
    tok = tokenizer(model_dir)
    text = open(os.path.join(model_dir, "heldout.txt"), encoding="utf-8").read()
    out = {"model": "models/inkling-demo", "window": WINDOW, "prompt_text": PROMPT}
    if tok is not None:
        out["heldout_ids"] = tok.encode(text)
        out["prompt_ids"] = tok.encode(chat_prompt(PROMPT))
    elif want is not None:
        print("note: python3-regex missing; the golden's ids are scored instead", file=sys.stderr)
        out["heldout_ids"], out["prompt_ids"] = want["heldout_ids"], want["prompt_ids"]
    else:
        raise SystemExit("demo_goldens: needs python3-regex to tokenize")
    model = inkling_ref.Model(model_dir, torch.float32)
    with torch.no_grad():
        nll, n = windows_nll(model, out["heldout_ids"], WINDOW)
        _, tokens, step_logits = inkling_ref.generate(model, out["prompt_ids"], None, GENERATE)
    out.update({"nll": nll, "tokens_scored": n, "perplexity": math.exp(nll / n), "tokens": tokens,
                "text": tok.decode(tokens) if tok else None,
                "min_top2_margin": float(inkling_ref.margins(torch.stack(step_logits)).min()),
                "eos": sorted(model.c.eos)})
    return out, tok is not None


def main():
    ap = argparse.ArgumentParser(description="reference goldens of the demo model")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "inkling-demo"))
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests", "fixtures", "demo", "inkling-demo.json"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    want = json.load(open(a.golden)) if a.check else None
    got, tokenized = compute(a.model, want)
    if not a.check:
        with open(a.golden, "w") as f:
            json.dump(got, f)
            f.write("\n")
        print(f"wrote {a.golden}: perplexity {got['perplexity']:.6f}, {len(got['tokens'])} tokens, "
              f"min margin {got['min_top2_margin']:.3f}: {got['text']!r}")
        return 0
    checks = Checks("demo goldens")
    tokenizer_check = "bpe.py still tokenizes heldout.txt and the prompt as the golden says"
    if tokenized:
        checks.report(tokenizer_check,
                      got["heldout_ids"] == want["heldout_ids"] and got["prompt_ids"] == want["prompt_ids"])
    elif os.environ.get("CI") == "true":
        # CI installs python3-regex (tools/deps/packages.txt): a skip there is a lost check.
        checks.report(tokenizer_check, False, "python3-regex is not installed (make deps)")
    else:
        # tests/run_all.sh counts SKIP lines in its final line.
        print(f"SKIP {tokenizer_check}: python3-regex is not installed (make deps)", flush=True)
    rel = abs(got["nll"] - want["nll"]) / abs(want["nll"])
    checks.report(f"reference held-out NLL equals the golden (relative diff {rel:.2e})", rel <= 1e-6)
    checks.report("reference greedy continuation equals the golden", got["tokens"] == want["tokens"])
    checks.report("the golden chat turn ends at the end-of-turn token", want["tokens"][-1] in want["eos"])
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
