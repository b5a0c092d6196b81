#!/usr/bin/python3
"""Inkling reference forward (PyTorch, float32 or float64) — the oracle for engine tests.

Written from docs/model.md (transformers' semantics), audio frame rows included. Two
independent formulations:

  Model.forward_full   the whole sequence at once: masked [S, S] attention, conv1d
  Session.feed         incremental: K/V cache (rings of W rows on sliding layers), the
                       four short-conv states per layer, any chunk size

`--check` asserts that both agree (one-shot, token by token, ragged chunks larger and
smaller than the window, and every decode step against a full recompute).

Usage:
  /usr/bin/python3 tools/reference/inkling_ref.py --model DIR --ids 1,2,3 [-n 32]
      [--audio FILE.dmel] [--check] [--f64]
prints one JSON object: prompt_ids, tokens, prompt_argmax, last_logits.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from inkling_load import ModelError, describe, layer_geom, load_weights, parse_config  # noqa: E402

AUDIO_EPS = 1e-6  # literal in the audio tower, independent of rms_norm_eps


def rmsnorm(x, w, eps):
    """x * rsqrt(mean(x^2) + eps) * w over the last axis; w used as is (not 1+w)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def ffn(x, gate, up, down):
    """down( silu(gate x) * up x ), weights [out, in]."""
    return (F.silu(x @ gate.T) * (x @ up.T)) @ down.T


class Model:
    def __init__(self, model_dir, dtype=torch.float32):
        self.c = c = parse_config(model_dir)
        W = load_weights(model_dir, c)
        self.layout = W["layout"]
        self.dtype = dtype

        def t(a):
            return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(dtype)

        self.embed_w = t(W["embed"])
        self.embed_norm = t(W["embed_norm"])
        self.norm = t(W["norm"])
        self.lm_head = t(W["lm_head"])
        self.audio_enc = t(W["audio_enc"])
        self.audio_norm = t(W["audio_norm"])
        self.layers = [{k: (v if isinstance(v, float) else t(v)) for k, v in w.items()}
                       for w in W["layers"]]

    # ---- pieces shared by both formulations (position-independent) ----

    def embed(self, ids, frames):
        """Token rows (+ embed norm); rows with a DMel frame are replaced by the audio row."""
        c = self.c
        for t_ in ids:
            if not 0 <= t_ < c.vocab:
                raise ModelError(f"token id {t_} outside the vocabulary [0, {c.vocab})")
        x = self.embed_w[torch.tensor(ids, dtype=torch.long)]
        if self.embed_norm is not None:
            x = rmsnorm(x, self.embed_norm, c.eps)
        if frames is not None:
            x = x.clone()
            for s, fr in enumerate(frames):
                if fr is not None:
                    x[s] = self.audio_row(fr)
        return x

    def audio_row(self, frame):
        c = self.c
        lv = torch.tensor(np.minimum(frame.astype(np.int64), c.mel_vocab - 1))
        rows = torch.arange(c.mel_bins) * c.mel_vocab + lv
        e = self.audio_enc[rows].sum(0)
        return rmsnorm(e, self.audio_norm, AUDIO_EPS)

    def tau(self, i, positions):
        """Per-query log temperature: 1 on local layers or without n_floor."""
        c = self.c
        if c.local[i] or c.n_floor is None:
            return None
        p1 = positions.to(self.dtype) + 1
        return 1 + c.alpha * torch.log(torch.clamp(p1 / c.n_floor, min=1.0))

    def mlp(self, i, h2):
        w = self.layers[i]
        c = self.c
        if not c.sparse[i]:
            return w["dense_scale"] * ffn(h2, w["gate"], w["up"], w["down"])
        E, k, ns = c.E, c.topk, c.ns
        logits = h2 @ w["router"].T                       # [S, E+ns]
        sig = torch.sigmoid(logits)
        choice = sig[:, :E] + w["router_bias"]            # bias: selection only
        chosen = []
        for _ in range(k):                                # strict max, ties -> lowest id
            j = torch.argmax(choice, dim=1)
            chosen.append(j)
            choice = choice.scatter(1, j[:, None], -math.inf)
        chosen = torch.stack(chosen, 1)                   # [S, k]
        s_routed = sig.gather(1, chosen)                  # [S, k]
        s_shared = sig[:, E:]                             # [S, ns]
        z = s_routed.sum(1, keepdim=True) + s_shared.sum(1, keepdim=True)
        scale = c.route_scale * w["router_scale"]
        g_routed = s_routed / z * scale
        g_shared = s_shared / z * scale
        out = torch.zeros_like(h2)
        for e in range(E):                                # increasing expert id
            hit = chosen == e                             # [S, k]
            rows = hit.any(1).nonzero()[:, 0]
            if rows.numel() == 0:
                continue
            g = (g_routed * hit).sum(1)[rows]
            y = ffn(h2[rows], w["x_gate"][e], w["x_up"][e], w["x_down"][e])
            out[rows] += g[:, None] * y
        for j in range(ns):
            out = out + g_shared[:, j:j + 1] * ffn(h2, w["s_gate"][j], w["s_up"][j], w["s_down"][j])
        return out

    def head(self, x):
        return (rmsnorm(x, self.norm, self.c.eps) / self.c.mup) @ self.lm_head.T

    def qkvr(self, i, h):
        w = self.layers[i]
        return h @ w["wq"].T, h @ w["wk"].T, h @ w["wv"].T, h @ w["wr"].T

    # ---- formulation 1: whole sequence, masks ----

    @staticmethod
    def conv_full(x, w):
        """x + causal depthwise conv (K-1 zeros of left padding, last tap = current)."""
        S, C = x.shape
        K = w.shape[1]
        y = F.conv1d(x.T[None], w[:, None, :], padding=K - 1, groups=C)[0, :, :S].T
        return x + y

    def forward_full(self, ids, frames=None):
        """Logits [S, unpad_vocab] for every position of one sequence starting at 0."""
        c = self.c
        x = self.embed(ids, frames)
        S = len(ids)
        pos = torch.arange(S)
        dist = pos[:, None] - pos[None, :]                # query row, key column
        for i in range(c.L):
            w = self.layers[i]
            H, KV, hd, ext = layer_geom(c, i)
            h = rmsnorm(x, w["attn_norm"], c.eps)
            q, k, v, r = self.qkvr(i, h)
            k = self.conv_full(k, w["k_conv"])
            v = self.conv_full(v, w["v_conv"])
            q = rmsnorm(q.view(S, H, hd), w["q_norm"], c.eps)
            k = rmsnorm(k.view(S, KV, hd), w["k_norm"], c.eps)
            v = v.view(S, KV, hd)
            grp = H // KV
            kh = k.repeat_interleave(grp, dim=1)          # [S, H, hd]
            vh = v.repeat_interleave(grp, dim=1)
            rl = torch.einsum("shd,de->hse", r.view(S, H, c.d_rel), w["relp"])  # [H, S, ext]
            inb = (dist >= 0) & (dist < ext)
            idx = dist.clamp(0, ext - 1)[None].expand(H, S, S)
            bias = rl.gather(2, idx) * inb
            sc = torch.einsum("shd,thd->hst", q, kh) / hd + bias
            tau = self.tau(i, pos)
            if tau is not None:
                sc = sc * tau[None, :, None]
            allowed = dist >= 0
            if c.local[i]:
                allowed = allowed & (dist < c.window)
            sc = sc.masked_fill(~allowed[None], -math.inf)
            p = torch.softmax(sc, dim=-1)
            ctx = torch.einsum("hst,thd->shd", p, vh).reshape(S, H * hd)
            a = self.conv_full(ctx @ w["wo"].T, w["attn_conv"])
            x = x + a
            h2 = rmsnorm(x, w["mlp_norm"], c.eps)
            m = self.conv_full(self.mlp(i, h2), w["mlp_conv"])
            x = x + m
        return self.head(x)


class Session:
    """Incremental state: K/V (ring of W rows on sliding layers), 4 conv states per layer."""

    def __init__(self, model):
        self.m = m = model
        c = m.c
        self.pos = 0
        self.conv = []
        self.kc, self.vc, self.ring_pos = [], [], []
        for i in range(c.L):
            H, KV, hd, _ = layer_geom(c, i)
            z = lambda C: torch.zeros(c.conv_k - 1, C, dtype=m.dtype)  # noqa: E731
            self.conv.append([z(KV * hd), z(KV * hd), z(c.D), z(c.D)])
            if c.local[i]:
                self.kc.append(torch.zeros(c.window, KV, hd, dtype=m.dtype))
                self.vc.append(torch.zeros(c.window, KV, hd, dtype=m.dtype))
                self.ring_pos.append([-1] * c.window)
            else:
                self.kc.append(torch.zeros(0, KV, hd, dtype=m.dtype))
                self.vc.append(torch.zeros(0, KV, hd, dtype=m.dtype))
                self.ring_pos.append(None)

    def conv_step(self, i, j, x, w):
        """x + conv over [state (last K-1 raw inputs), x]; state <- last K-1 raw inputs."""
        S = x.shape[0]
        K = w.shape[1]
        col = torch.cat([self.conv[i][j], x], 0)          # [K-1+S, C]
        out = x.clone()
        for tap in range(K):
            out = out + w[:, tap] * col[tap:tap + S]
        self.conv[i][j] = col[S:].clone()
        return out

    def _key(self, i, t, pos0, fresh_k, fresh_v):
        if t >= pos0:
            return fresh_k[t - pos0], fresh_v[t - pos0]
        if self.ring_pos[i] is None:
            return self.kc[i][t], self.vc[i][t]
        row = t % self.m.c.window
        assert self.ring_pos[i][row] == t, f"ring row {row} holds {self.ring_pos[i][row]}, want {t}"
        return self.kc[i][row], self.vc[i][row]

    def attention(self, i, q, k, v, r, pos0):
        m, c = self.m, self.m.c
        H, KV, hd, ext = layer_geom(c, i)
        S = q.shape[0]
        grp = H // KV
        W = c.window
        relp = m.layers[i]["relp"]
        tau = m.tau(i, torch.arange(pos0, pos0 + S))
        ctx = torch.empty(S, H, hd, dtype=m.dtype)
        for s in range(S):
            p = pos0 + s
            t0 = max(0, p - W + 1) if c.local[i] else 0
            kv = [self._key(i, t, pos0, k, v) for t in range(t0, p + 1)]
            ks = torch.stack([a for a, _ in kv]).repeat_interleave(grp, dim=1)  # [n, H, hd]
            vs = torch.stack([b for _, b in kv]).repeat_interleave(grp, dim=1)
            rl = r[s].view(H, c.d_rel) @ relp                                    # [H, ext]
            d = torch.arange(p - t0, -1, -1)                                     # dist per key
            bias = torch.zeros(H, d.numel(), dtype=m.dtype)
            ok = d < ext
            bias[:, ok] = rl[:, d[ok]]
            sc = (ks * q[s][None]).sum(-1).T / hd + bias                         # [H, n]
            if tau is not None:
                sc = sc * tau[s]
            pr = torch.softmax(sc, dim=-1)
            ctx[s] = torch.einsum("hn,nhd->hd", pr, vs)
        # append after scoring; the ring only keeps the last W rows of a long chunk
        if self.ring_pos[i] is None:
            self.kc[i] = torch.cat([self.kc[i], k], 0)
            self.vc[i] = torch.cat([self.vc[i], v], 0)
        else:
            for s in range(max(0, S - W), S):
                row = (pos0 + s) % W
                self.kc[i][row] = k[s]
                self.vc[i][row] = v[s]
                self.ring_pos[i][row] = pos0 + s
        return ctx.reshape(S, H * hd)

    def feed(self, ids, frames=None):
        """Run ids at positions pos..pos+S-1; returns logits [S, unpad_vocab]."""
        m, c = self.m, self.m.c
        S = len(ids)
        pos0 = self.pos
        x = m.embed(ids, frames)
        for i in range(c.L):
            w = m.layers[i]
            H, KV, hd, _ = layer_geom(c, i)
            h = rmsnorm(x, w["attn_norm"], c.eps)
            q, k, v, r = m.qkvr(i, h)
            k = self.conv_step(i, 0, k, w["k_conv"])
            v = self.conv_step(i, 1, v, w["v_conv"])
            q = rmsnorm(q.view(S, H, hd), w["q_norm"], c.eps)
            k = rmsnorm(k.view(S, KV, hd), w["k_norm"], c.eps)
            v = v.view(S, KV, hd)
            ctx = self.attention(i, q, k, v, r, pos0)
            x = x + self.conv_step(i, 2, ctx @ w["wo"].T, w["attn_conv"])
            h2 = rmsnorm(x, w["mlp_norm"], c.eps)
            x = x + self.conv_step(i, 3, m.mlp(i, h2), w["mlp_conv"])
        self.pos += S
        return m.head(x)


# --------------------------------------------------------------------------- driver

def read_dmel(path, c, model, ids):
    """Frames aligned with the prompt: the n-th <|audio|> id takes the n-th frame."""
    data = open(path, "rb").read()
    if len(data) % c.mel_bins:
        raise ModelError(f"{path}: {len(data)} bytes is not a multiple of mel_bins={c.mel_bins}")
    if model.audio_enc is None:
        raise ModelError(f"{path}: audio given but the model has no audio tensors "
                         f"(model.audio.encoder.weight / audio.safetensors)")
    fr = np.frombuffer(data, dtype=np.uint8).reshape(-1, c.mel_bins)
    slots = [s for s, t in enumerate(ids) if t == c.audio_tok]
    if len(slots) != len(fr):
        raise ModelError(f"audio frames ({len(fr)}) do not match <|audio|> placeholders "
                         f"({len(slots)}, id {c.audio_tok})")
    frames = [None] * len(ids)
    for s, f in zip(slots, fr):
        frames[s] = f
    return frames


def argmax_ids(logits):
    return [int(t) for t in torch.argmax(logits, dim=-1)]   # first max: lowest id on ties


def generate(model, ids, frames, n):
    """Prefill in one chunk, then greedy decode; the last token is never fed back."""
    sess = Session(model)
    pre = sess.feed(ids, frames)
    tokens, step_logits = [], []
    last = pre[-1]
    for step in range(n):
        tok = int(torch.argmax(last))
        tokens.append(tok)
        step_logits.append(last)
        if tok in model.c.eos or step == n - 1:
            break
        last = sess.feed([tok])[0]
    return pre, tokens, step_logits


def margins(logits):
    top2 = torch.topk(logits, 2, dim=-1).values
    return (top2[..., 0] - top2[..., 1])


def check(model, ids, frames, pre, tokens, step_logits):
    """full == one-shot == token-by-token == ragged chunks, and decode == full recompute."""
    c = model.c
    tol = 2e-5 if model.dtype == torch.float32 else 1e-12  # relative to max |logit|
    full = model.forward_full(ids, frames)
    scale = max(1.0, float(full.abs().max()))
    report = {}

    def cmp(name, a, b):
        d = float((a - b).abs().max()) if a.numel() else 0.0
        report[name] = d
        if d > tol * scale:
            raise AssertionError(f"check failed: {name}: max |diff| {d:.3g} > {tol * scale:.3g}")
        if argmax_ids(a) != argmax_ids(b):
            raise AssertionError(f"check failed: {name}: argmax differs")

    cmp("one-shot vs full", pre, full)
    sess = Session(model)
    rows = [sess.feed([t], None if frames is None else [frames[s]])[0] for s, t in enumerate(ids)]
    cmp("token-by-token vs full", torch.stack(rows), full)
    W = c.window
    sizes = [1, 2, W + 3, 3, 2 * W + 1, 5, 7]
    sess, out, s, j = Session(model), [], 0, 0
    chunks = []
    while s < len(ids):
        n = min(sizes[j % len(sizes)], len(ids) - s)
        out.append(sess.feed(ids[s:s + n], None if frames is None else frames[s:s + n]))
        chunks.append(n)
        s += n
        j += 1
    cmp(f"chunks {chunks} vs full", torch.cat(out), full)
    if len(tokens) > 1:
        seq = ids + tokens[:-1]
        fr = None if frames is None else frames + [None] * (len(tokens) - 1)
        full2 = model.forward_full(seq, fr)[len(ids) - 1:]
        cmp(f"{len(tokens)} decode steps vs full recompute", torch.stack(step_logits), full2)
    mp = margins(full)
    stats = {
        "config": describe(c), "layout": model.layout, "dtype": str(model.dtype),
        "max_abs_diff": report, "tolerance": tol * scale,
        "last_logits_range": float(full[-1].max() - full[-1].min()),
        "last_logits_std": float(full[-1].std()),
        "distinct_prompt_argmax": len(set(argmax_ids(full))),
        "distinct_generated": len(set(tokens)),
        "min_top2_margin_prompt": float(mp.min()),
        "min_top2_margin_generated": float(margins(torch.stack(step_logits)).min()) if tokens else None,
    }
    print(json.dumps(stats), file=sys.stderr)


def parse_ids(s):
    try:
        ids = [int(x) for x in s.split(",") if x.strip() != ""]
    except ValueError:
        raise ModelError(f"--ids: expected comma-separated integers, found {s!r}") from None
    if not ids:
        raise ModelError("--ids: empty prompt")
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description="Inkling reference forward (PyTorch oracle)")
    ap.add_argument("--model", required=True, help="model directory (config.json + safetensors)")
    ap.add_argument("--ids", required=True, help="prompt token ids, comma separated")
    ap.add_argument("-n", type=int, default=32, help="greedy tokens to generate (default 32)")
    ap.add_argument("--audio", help="raw DMel file, u8 [n_frames][n_mel_bins]")
    ap.add_argument("--check", action="store_true",
                    help="assert full == incremental == chunked logits; stats on stderr")
    ap.add_argument("--f64", action="store_true", help="compute in float64 instead of float32")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    try:
        if a.n < 0:
            raise ModelError("-n must be >= 0")
        model = Model(a.model, torch.float64 if a.f64 else torch.float32)
        ids = parse_ids(a.ids)
        frames = read_dmel(a.audio, model.c, model, ids) if a.audio else None
        with torch.no_grad():
            pre, tokens, step_logits = generate(model, ids, frames, a.n)
            if a.check:
                check(model, ids, frames, pre, tokens, step_logits)
    except (ModelError, OSError) as e:
        print(f"inkling_ref: error: {e}", file=sys.stderr)
        return 2
    except AssertionError as e:
        print(f"inkling_ref: {e}", file=sys.stderr)
        return 1
    # Teacher-forced negative log-likelihood of the prompt (each position predicting the
    # next id), in float64: what `inkling eval` reports as perplexity.
    logp = torch.log_softmax(pre.to(torch.float64), dim=-1)
    nll = -sum(float(logp[i, ids[i + 1]]) for i in range(len(ids) - 1))
    out = {
        "prompt_ids": ids,
        "tokens": tokens,
        "prompt_argmax": argmax_ids(pre),
        "last_logits": [float(x) for x in pre[-1]],
        "prompt_nll": nll,
        "prompt_nll_tokens": len(ids) - 1,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
