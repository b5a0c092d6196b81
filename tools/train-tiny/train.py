#!/usr/bin/python3
"""Trains the demo model `models/inkling-demo`: a small Inkling that answers in fortunes.

    nice -n 10 /usr/bin/python3 tools/train-tiny/train.py --out models/inkling-demo \
        [--seed 1] [--steps 2600] [--f32-out /tmp/inkling-demo-f32]

Everything is a function of --seed (torch on 2 threads, deterministic algorithms):
  1. corpus.py: Debian's fortunes, a held-out slice (~4%), TMLv0 conversations;
  2. bpe.py: a 4096-token byte-level BPE (o200k regex, TMLv0 added tokens on top);
  3. the model is tools/reference/inkling_ref.py's Model — the engine's oracle — loaded
     from an initial checkpoint that tools/make-tiny writes (make_weights, layout_tensors,
     encode, write_safetensors), with its tensors made trainable; the loss is the
     cross-entropy of Model.forward_full on packed sequences of conversations;
  4. export: the trained tensors go back through make-tiny's writer in the release layout
     (model.llm.*, interleaved gate/up), bf16, with config.json and tokenizer.json, plus
     heldout.txt, train_log.json and loss.png.

Router bias (mlp.gate.bias, `e_score_correction_bias`): it only affects which experts are
chosen, so it gets no gradient. After every step it moves by the loss-free balancing rule
of DeepSeek-V3: bias_e += BIAS_RATE * sign(mean load - load_e), the load counted over the
step's tokens. The learned scalars mlp.global_scale / mlp.gate.global_scale stay 1.
"""

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tools", "make-tiny"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bpe  # noqa: E402
import corpus  # noqa: E402
from demo_goldens import windows_nll  # noqa: E402  (as `inkling eval` scores)
import inkling_ref  # noqa: E402
import make_tiny  # noqa: E402

VOCAB = 4096
SEQ = 1024           # tokens per training sequence (packed conversations)
BIAS_RATE = 1e-3     # router bias balancing step
EVAL_WINDOW = 512    # `make eval` scores held-out text in windows of this many tokens
HELDOUT_CONVERSATIONS_SEED = 12345
HELDOUT_CONVERSATIONS = 128  # small enough for the torch reference in a test


def geometry(tok):
    """make_tiny-style geometry: every layer kind of the real model, a few million weights."""
    eos = tok.id_of("<|content_model_end_sampling|>")
    return dict(
        make_tiny._COMMON, vocab=tok.vocab_size, unpad=tok.vocab_size, D=192, L=6,
        heads=4, kv=2, hd=48, swa_heads=4, swa_kv=2, swa_hd=48, window=32, d_rel=8,
        rel_extent=SEQ, n_floor=64, alpha=0.1, conv_k=4, E=8, topk=2, ns=1, moe_inter=192,
        dense_inter=512, route_scale=2.0, mup=4.0, eps=1e-6, eos=eos, audio=None,
        schedule="layer_types",
        types=["hybrid_sliding", "hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid_sliding", "hybrid"],
        dense_mlp_idx=1,
        doc="inkling-demo: 6 layers (sliding W=32 x4, global x2 with tau from position 64), "
            "layer 0 dense, 1-5 MoE (8 experts top-2 + 1 shared), D=192, 4096-token BPE")


def config_for(g, tok, dtype):
    cfg = make_tiny.config_json(g, "release", dtype)
    cfg["audio_token_id"] = tok.id_of("<|audio|>")   # no audio tower; the id stays in-vocab
    return cfg


def write_checkpoint(outdir, g, w, tok, dtype):
    """make-tiny's release writer: one model.safetensors, config.json, tokenizer.json."""
    os.makedirs(outdir, exist_ok=True)
    model, _ = make_tiny.layout_tensors(g, w, "release", None)
    make_tiny.write_safetensors(os.path.join(outdir, "model.safetensors"), make_tiny.encode(model, dtype))
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(config_for(g, tok, dtype), f, indent=2)
        f.write("\n")
    tok.save(os.path.join(outdir, "tokenizer.json"))


class TrainModel(inkling_ref.Model):
    """The reference model with trainable tensors; counts expert loads for the bias rule."""

    def __init__(self, model_dir, device="cpu"):
        super().__init__(model_dir, torch.float32)
        self.loads = {}
        for name in ("embed_w", "embed_norm", "norm", "lm_head"):
            setattr(self, name, getattr(self, name).to(device).requires_grad_(True))
        for w in self.layers:
            for k, v in w.items():
                if torch.is_tensor(v):
                    w[k] = v.to(device).requires_grad_(k != "router_bias")

    def params(self):
        out = [self.embed_w, self.embed_norm, self.norm, self.lm_head]
        for w in self.layers:
            out += [v for k, v in sorted(w.items()) if torch.is_tensor(v) and v.requires_grad]
        return out

    @staticmethod
    def conv_full(x, w):
        """Model.conv_full (x + causal depthwise conv) written as Session.conv_step writes it
        with a zero state: the same sum, but torch 1.13's CPU backward of a depthwise
        F.conv1d takes seconds per call, this one milliseconds."""
        S, K = x.shape[0], w.shape[1]
        col = torch.cat([x.new_zeros(K - 1, x.shape[1]), x], 0)
        out = x
        for tap in range(K):
            out = out + w[:, tap] * col[tap:tap + S]
        return out

    def mlp(self, i, h2):
        if self.c.sparse[i] and torch.is_grad_enabled():
            with torch.no_grad():                       # which experts the reference picks
                w = self.layers[i]
                sig = torch.sigmoid(h2 @ w["router"].T)[:, :self.c.E] + w["router_bias"]
                chosen = torch.topk(sig, self.c.topk, dim=1).indices
                self.loads[i] = torch.bincount(chosen.reshape(-1), minlength=self.c.E).float()
        return super().mlp(i, h2)

    def balance_router(self):
        for i, load in self.loads.items():
            b = self.layers[i]["router_bias"]
            b += BIAS_RATE * torch.sign(load.mean() - load)
        self.loads = {}

    def canonical(self):
        """The weights as make_tiny's canonical dict (f32 numpy)."""
        n = lambda t: t.detach().to("cpu", torch.float32).numpy().copy()  # noqa: E731
        w = {"embed": n(self.embed_w), "embed_norm": n(self.embed_norm), "norm": n(self.norm),
             "lm_head": n(self.lm_head)}
        for i, lw in enumerate(self.layers):
            for k, v in lw.items():
                if isinstance(v, float):
                    w[f"L{i}.{k}"] = np.array([v], np.float32)
                elif k.endswith("_conv"):
                    w[f"L{i}.{k}"] = n(v)[:, None, :]
                else:
                    w[f"L{i}.{k}"] = n(v)
        return w


def initial_weights(g, seed):
    """make_tiny's generator, rescaled for training: logits near uniform at the start,
    unit gates and scales, zero router bias."""
    w = make_tiny.make_weights(g, "inkling-demo", seed)
    w["lm_head"] *= 0.5 / 3.0
    for k in list(w):
        if k.endswith(("dense_scale", "router_scale")):
            w[k][:] = 1.0
        elif k.endswith("router_bias"):
            w[k][:] = 0.0
    return w


def pack(convs, tok, rng):
    """Conversations (shuffled) into sequences of at most SEQ+1 ids, each starting at a
    conversation's first token."""
    seqs, cur = [], []
    for text in convs:
        ids = tok.encode(text)[:SEQ + 1]
        if cur and len(cur) + len(ids) > SEQ + 1:
            seqs.append(cur)
            cur = []
        cur = cur + ids
    if cur:
        seqs.append(cur)
    rng.shuffle(seqs)
    return seqs


def heldout_text(held, train_df):
    """The evaluation text: the first HELDOUT_CONVERSATIONS held-out fortunes, one
    conversation each, prompts drawn with a fixed seed."""
    conv = corpus.Conversations(held, df=train_df)
    rng = random.Random(HELDOUT_CONVERSATIONS_SEED)
    return "".join(conv.render([conv.prompt(c, t, rng)]) for c, t in held[:HELDOUT_CONVERSATIONS])


def plot(log, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    st = [x["step"] for x in log["train"]]
    ax.plot(st, [x["loss"] for x in log["train"]], lw=0.8, label="train (mean of 50 steps)")
    ax.plot([x["step"] for x in log["heldout"]], [x["loss"] for x in log["heldout"]], "o-",
            label="held-out (heldout.txt)")
    ax.set_xlabel(f"step (one sequence of <= {SEQ} tokens)")
    ax.set_ylabel("cross-entropy, nats/token")
    ax.set_title("inkling-demo training")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2600)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--f32-out", help="also write an f32 copy here (quality figures)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--fortunes", default=corpus.FORTUNE_DIR, help="the fortune files")
    ap.add_argument("--max-seconds", type=float, help="stop training early after this long")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.device != "cpu":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_default_device(a.device)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(a.seed)
    t_start = time.time()

    items = corpus.fortunes(a.fortunes)
    train_items, held_items = corpus.split(items)
    conv = corpus.Conversations(train_items)
    rng = random.Random(a.seed)
    tok = bpe.train(conv.epoch(random.Random(a.seed + 1000)), VOCAB)
    g = geometry(tok)
    held_text = heldout_text(held_items, conv.df)
    held_ids = tok.encode(held_text)
    print(f"corpus: {len(train_items)} train / {len(held_items)} held-out fortunes; "
          f"held-out text {len(held_ids)} tokens; tokenizer {tok.vocab_size} ids", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        write_checkpoint(tmp, g, initial_weights(g, a.seed), tok, "f32")
        model = TrainModel(tmp, a.device)
    params = model.params()
    n_params = sum(p.numel() for p in params) + sum(
        w["router_bias"].numel() for w in model.layers if "router_bias" in w)
    print(f"model: {inkling_ref.describe(model.c)}; {n_params} parameters", flush=True)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.98), eps=1e-9)
    warm = 100

    def lr_at(step):
        if step < warm:
            return a.lr * (step + 1) / warm
        p = (step - warm) / max(1, a.steps - warm)
        return a.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * p)))

    log = {"train": [], "heldout": []}
    seqs, epoch, tokens_seen, acc = [], 0, 0, []
    t_train = time.time()
    for step in range(a.steps):
        if not seqs:
            seqs = pack(conv.epoch(rng), tok, rng)
            epoch += 1
        ids = seqs.pop()
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step)
        logits = model.forward_full(ids[:-1])
        loss = F.cross_entropy(logits, torch.tensor(ids[1:]))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        model.balance_router()
        tokens_seen += len(ids) - 1
        acc.append(float(loss.detach()))
        if a.max_seconds and time.time() - t_train > a.max_seconds:
            print(f"stopping at step {step + 1}: --max-seconds", flush=True)
            log["stopped_at_step"] = step + 1
            break
        if (step + 1) % 50 == 0:
            log["train"].append({"step": step + 1, "loss": sum(acc) / len(acc), "epoch": epoch,
                                 "tokens": tokens_seen, "seconds": time.time() - t_train})
            acc = []
            print(f"step {step + 1} epoch {epoch} loss {log['train'][-1]['loss']:.3f} "
                  f"lr {lr_at(step):.2e} {time.time() - t_train:.0f}s", flush=True)
        if (step + 1) % 250 == 0 or step + 1 == a.steps:
            with torch.no_grad():
                nll, n = windows_nll(model, held_ids, EVAL_WINDOW)
            log["heldout"].append({"step": step + 1, "loss": nll / n})
            print(f"  held-out loss {nll / n:.3f} (ppl {math.exp(nll / n):.1f})", flush=True)
    train_seconds = time.time() - t_train

    with torch.no_grad():
        nll, n = windows_nll(model, held_ids, EVAL_WINDOW)
    w = model.canonical()
    os.makedirs(a.out, exist_ok=True)
    write_checkpoint(a.out, g, w, tok, "bf16")
    with open(os.path.join(a.out, "heldout.txt"), "w") as f:
        f.write(held_text)
    if a.f32_out:
        write_checkpoint(a.f32_out, g, w, tok, "f32")
    biases = [[round(float(x), 4) for x in lw["router_bias"]] for lw in model.layers if "router_bias" in lw]
    log.update({
        "seed": a.seed, "steps": a.steps, "lr": a.lr, "seq": SEQ, "epochs_started": epoch,
        "tokens_seen": tokens_seen, "train_seconds": train_seconds,
        "total_seconds": time.time() - t_start, "threads": a.threads, "parameters": n_params,
        "final_train_loss": log["train"][-1]["loss"] if log["train"] else None,
        "heldout_tokens_scored": n, "heldout_nll_f32": nll, "heldout_ppl_f32": math.exp(nll / n),
        "train_fortunes": len(train_items), "heldout_fortunes": len(held_items),
        "router_bias": biases, "describe": inkling_ref.describe(model.c), "device": a.device,
        "torch": torch.__version__,
    })
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)
        f.write("\n")
    plot(log, os.path.join(a.out, "loss.png"))
    print(f"done: {train_seconds:.0f}s training, held-out ppl (f32, training process) "
          f"{math.exp(nll / n):.2f}", flush=True)


if __name__ == "__main__":
    main()
