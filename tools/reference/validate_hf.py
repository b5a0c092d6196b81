"""Compare inkling_ref.py with transformers' InklingForCausalLM (eager attention).

Needs a Python with transformers >= 5.17 (Inkling) and torch, which Debian 12 lacks: it was
run where transformers 5.17.0 and torch 2.11 were installed (tools/reference/README.md), on the
CPU:

  python3 tools/reference/validate_hf.py FIXTURE_DIR... [--json OUT.json]

Each FIXTURE_DIR is a transformers-layout tiny model from tools/make-tiny (hf layout,
embed norm named model.embed_norm.weight); the prompt is its make_tiny.json
suggested_prompt (text only: InklingForCausalLM has no audio tower). For float32 and
float64 it reports the max |logit| difference over every prompt position, whether the
teacher-forced argmax agrees, and whether 32 greedy tokens (transformers generate with
its own cache vs our incremental Session) agree. transformers forces float32 in its
RMSNorm, softmax, tau, short convs and shared-expert sum, so its "float64" run is only
float32-accurate: expect ~1e-5 in both rows, not 1e-12.
"""

import argparse
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import inkling_ref  # noqa: E402


def hf_run(d, dtype, ids, n):
    from transformers import InklingForCausalLM
    kw = dict(attn_implementation="eager", dtype=dtype, output_loading_info=True)
    try:  # the eager expert loop (the default grouped_mm kernel has no float64)
        m, info = InklingForCausalLM.from_pretrained(d, experts_implementation="eager", **kw)
    except (TypeError, ValueError):
        m, info = InklingForCausalLM.from_pretrained(d, **kw)
    m.eval()
    x = torch.tensor([ids])
    with torch.no_grad():
        logits = m(x, use_cache=False).logits[0]
        gen = m.generate(x, max_new_tokens=n, do_sample=False, use_cache=True)[0, len(ids):]
    info = {k: sorted(v) if isinstance(v, (set, list)) else str(v) for k, v in info.items()}
    return logits, [int(t) for t in gen], info


def one(d, n):
    meta = json.load(open(os.path.join(d, "make_tiny.json")))
    ids = meta["suggested_prompt"]
    res = {"fixture": os.path.basename(d.rstrip("/")), "prompt": ids}
    for name, dt in (("f32", torch.float32), ("f64", torch.float64)):
        try:
            hl, htok, info = hf_run(d, dt, ids, n)
        except Exception:
            res[name] = {"error": traceback.format_exc()}
            continue
        model = inkling_ref.Model(d, dt)
        with torch.no_grad():
            full = model.forward_full(ids)
            _, tok, _ = inkling_ref.generate(model, ids, None, n)
        u = model.c.unpad_vocab
        hl = hl[:, :u].to(dt)
        # transformers generate() stops at eos and includes it, like our tokens
        res[name] = {
            "hf_logits_cols": int(hl.shape[1]),
            "max_abs_diff": float((hl - full).abs().max()),
            "max_abs_logit": float(full.abs().max()),
            "argmax_equal": inkling_ref.argmax_ids(hl) == inkling_ref.argmax_ids(full),
            "tokens_equal": htok == tok,
            "hf_tokens": htok, "ref_tokens": tok,
            "load_info": info,
        }
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(4)
    out = []
    for d in a.dirs:
        try:
            r = one(d, a.n)
        except Exception:
            r = {"fixture": d, "error": traceback.format_exc()}
        out.append(r)
        brief = {k: v for k, v in r.items() if k not in ("f32", "f64", "prompt")}
        for k in ("f32", "f64"):
            if k in r:
                if "error" in r[k]:
                    brief[k] = r[k]["error"].strip().splitlines()[-1]
                    continue
                brief[k] = {x: r[k][x] for x in ("max_abs_diff", "argmax_equal", "tokens_equal",
                                                 "hf_logits_cols")}
                li = r[k]["load_info"]
                brief[k]["load_issues"] = {x: v for x, v in li.items() if v and v != "[]"}
        print(json.dumps(brief), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
