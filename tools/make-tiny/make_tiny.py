#!/usr/bin/python3
"""Deterministic tiny random Inkling checkpoints for tests (no torch needed: numpy only).

  make_tiny.py OUTDIR --geometry NAME [--layout release|hf] [--dtype f32|bf16] [--seed S]
               [--embed-norm-name model|embed_tokens] [--set KEY=INT ...]
  make_tiny.py --list
  make_tiny.py --describe --geometry NAME [...]   key and bytes of that fixture, as JSON
  make_tiny.py --all OUTDIR          every fixture of FIXTURES as OUTDIR/<name>/

Weights come from a counter-based generator (splitmix64 keyed by seed, geometry and the
tensor's canonical name), so a fixture is byte-identical on every run and machine, and
the two layouts (and f32/bf16) of one geometry hold the same weights: the release layout
row-interleaves the fused gate/up tensors; bf16 is the f32 value rounded to nearest even.

Scales are chosen so the model behaves like a trained one in the ways the tests need:
peaked attention (q/k norm weights ~2.5, relative bias of std ~1.5), router logits of std
~1.5, logits of std ~3, every sub-block contributing O(1) to the residual stream.

Layouts (docs/model.md, "Checkpoint layouts"):
  release  model.llm.* names, fused w13 tensors interleaved, nested config.json
           (text_config + root eos/audio keys), 2 shards + model.safetensors.index.json,
           unembed [unpadded_vocab, D], audio tensors inside the model
  hf       transformers names (model.layers.N.*), flat config.json, one model.safetensors,
           lm_head [vocab, D], audio tensors in an audio.safetensors sidecar
bf16 files keep the short-conv weights, mlp.gate bias and mlp.gate.global_scale in F32,
as the released checkpoints do.

Every matrix is generated block by block while it is written (a safetensors header with
all offsets first, then each tensor's rows, each block freed once written), so a fixture
of any size needs only a few MB of memory: the `small` geometry (Inkling-Small's layer
shapes) writes tens of GB.

Each fixture directory also gets make_tiny.json (geometry, a suggested prompt) and, for
audio geometries, sample.dmel (raw u8 [frames][n_mel_bins]) matching that prompt.
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tensor_names as tn  # noqa: E402

# --------------------------------------------------------------------------- geometries

_COMMON = dict(vocab=512, unpad=500, D=64, heads=4, kv=2, hd=16, swa_heads=4, swa_kv=4,
               swa_hd=16, window=8, d_rel=8, rel_extent=32, n_floor=8, alpha=0.1, conv_k=4,
               E=8, topk=2, ns=2, moe_inter=32, dense_inter=96, route_scale=2.0, mup=4.0,
               eps=1e-6, eos=None, audio=None)

GEOMETRIES = {
    # default local/global schedule (layer 5 global), dense layers 0-1, 2 shared experts
    "base": dict(_COMMON, L=6, schedule="default", dense_mlp_idx=2,
                 doc="6 layers, default schedule (layer 5 global), dense 0-1 then MoE, ns=2"),
    # window 4 so rings wrap many times; global rel_extent 6 < prompt (bias zero beyond);
    # n_floor 3; MQA global layer; sliding layers with other heads/hd; K_c 3; all MoE, ns=1
    "ring": dict(_COMMON, L=3, vocab=384, unpad=384, D=48, heads=4, kv=1, hd=16,
                 swa_heads=6, swa_kv=3, swa_hd=8, window=4, d_rel=4, rel_extent=6, n_floor=3,
                 conv_k=3, E=4, topk=1, ns=1, moe_inter=24, route_scale=1.5, mup=3.0,
                 schedule="layer_types", types=["hybrid_sliding", "hybrid", "hybrid_sliding"],
                 dense_mlp_idx=0, eos=1,
                 doc="W=4, rel_extent=6, n_floor=3, K_c=3, MQA global, all MoE, ns=1, k=1; "
                     "eos 1 is generated at step 19 of the suggested prompt (seed 1)"),
    # dense only, no tau, MHA global / 1-kv sliding with a different head dim
    "dense": dict(_COMMON, L=4, vocab=256, unpad=250, D=48, heads=4, kv=4, hd=12,
                  swa_heads=2, swa_kv=1, swa_hd=24, window=16, rel_extent=64, n_floor=None,
                  dense_inter=80, moe_inter=16, mup=2.0, schedule="local_layer_ids",
                  local_ids=[0, 2], dense_mlp_idx=4,
                  doc="all dense MLP, local_layer_ids [0,2], no tau, W=16, swa hd 24 vs 12"),
    # precedence: layer_types beats a contradicting local_layer_ids, mlp_layer_types beats
    # a contradicting dense_mlp_idx; 16 experts top-4, tau from position 2
    "mixed": dict(_COMMON, L=5, window=6, rel_extent=12, n_floor=2, swa_kv=2, E=16, topk=4,
                  ns=2, moe_inter=16, dense_inter=64, schedule="layer_types",
                  types=["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid_sliding", "hybrid"],
                  decoy_local_ids=[1, 4],
                  mlp_types=["sparse", "dense", "sparse", "sparse", "dense"], dense_mlp_idx=3,
                  eos=7,
                  doc="layer_types/mlp_layer_types vs contradicting local_layer_ids/dense_mlp_idx, "
                      "E=16 k=4, n_floor=2"),
    # audio tower: 80 mel bins x 16 levels; placeholder id inside the vocabulary
    "audio": dict(_COMMON, L=3, ns=1, schedule="local_layer_ids", local_ids=[0, 1],
                  dense_mlp_idx=1, audio=dict(n_mel_bins=80, mel_vocab_size=16, token=451),
                  eos=499,
                  doc="audio tower (80x16 DMel), audio_token_id 451, ns=1, layers L L G"),
    # the demo model `make run` starts: tiny layers on the real Inkling vocabulary (o200k +
    # TMLv0 specials), EOS 200006 and the <|audio|> placeholder 200023; random weights
    "demo": dict(_COMMON, L=4, vocab=201024, unpad=200058, schedule="default", dense_mlp_idx=1,
                 audio=dict(n_mel_bins=80, mel_vocab_size=16, token=200023), eos=200006,
                 doc="demo: 4 tiny layers on the real 200058-token Inkling vocabulary, eos 200006"),
    # the benchmark's mid-size model: D=1024, 12 layers, 32 experts (top 4 + 1 shared)
    "mid": dict(_COMMON, L=12, vocab=32000, unpad=32000, D=1024, heads=16, kv=4, hd=64,
                swa_heads=16, swa_kv=4, swa_hd=64, window=256, d_rel=16, rel_extent=1024,
                n_floor=None, E=32, topk=4, ns=1, moe_inter=512, dense_inter=2048,
                route_scale=2.5, mup=8.0, schedule="default", dense_mlp_idx=1,
                doc="bench: D=1024, 12 layers (every 6th global), 32 experts top-4 + 1 shared, I=512"),
    # the expert cache's benchmark: routed experts too big to keep in RAM casually (4.4 GB
    # bf16, 2.2 GB as int8 experts.inkx)
    "disk": dict(_COMMON, L=12, vocab=32000, unpad=32000, D=1024, heads=16, kv=4, hd=64,
                 swa_heads=16, swa_kv=4, swa_hd=64, window=256, d_rel=16, rel_extent=1024,
                 n_floor=None, E=64, topk=4, ns=1, moe_inter=1024, dense_inter=2048,
                 route_scale=2.5, mup=8.0, schedule="default", dense_mlp_idx=1,
                 doc="bench: D=1024, 12 layers (11 MoE), 64 experts top-4 + 1 shared, I=1024; "
                     "~2.2 GB of int8 experts once converted"),
    # the benchmark at Inkling-Small's real width (`make bench`, docs/performance.md): every
    # per-layer shape of Inkling-Small's released config (docs/model.md, "Config": D 4096,
    # 32 heads, 8 kv heads, head dim 128 on both layer kinds,
    # window 512, d_rel 16, rel_extent 1024, n_floor 128000, dense width 16384, expert
    # width 2048, top-6 + 2 shared, route_scale 8, mup 16, vocab 201024/200058), but 6 of
    # its 42 layers (dense 0-1, MoE 2-5, layer 5 global as in the real schedule) and 128 of
    # its 256 experts: 31 GB of bf16, 12 GB once converted with int4 experts
    "small": dict(_COMMON, L=6, vocab=201024, unpad=200058, D=4096, heads=32, kv=8, hd=128,
                  swa_heads=32, swa_kv=8, swa_hd=128, window=512, d_rel=16, rel_extent=1024,
                  n_floor=128000, E=128, topk=6, ns=2, moe_inter=2048, dense_inter=16384,
                  route_scale=8.0, mup=16.0, schedule="default", dense_mlp_idx=2, eos=200006,
                  doc="bench: Inkling-Small's layer shapes (D=4096, 32/8 heads, hd 128, W=512, "
                      "dense 16384, experts 2048 top-6 + 2 shared), 6 layers (dense 0-1, MoE 2-5, "
                      "5 global), 128 experts, real vocabulary; ~31 GB bf16"),
}

# (fixture name, geometry, layout, dtype, embed norm name)
FIXTURES = [
    ("base-hf-f32", "base", "hf", "f32", "model"),
    ("base-hf-bf16", "base", "hf", "bf16", "model"),
    ("base-release-f32", "base", "release", "f32", None),
    ("base-release-bf16", "base", "release", "bf16", None),
    ("ring-hf-f32", "ring", "hf", "f32", "model"),
    ("ring-release-bf16", "ring", "release", "bf16", None),
    ("dense-hf-f32", "dense", "hf", "f32", "embed_tokens"),
    ("dense-release-bf16", "dense", "release", "bf16", None),
    ("mixed-hf-f32", "mixed", "hf", "f32", "model"),
    ("mixed-release-bf16", "mixed", "release", "bf16", None),
    ("audio-hf-f32", "audio", "hf", "f32", "model"),
    ("audio-release-bf16", "audio", "release", "bf16", None),
]

DEFAULT_SEED = 1
# Part of every fixture's key (describe()): bump it when a change here alters the values
# or names written for an unchanged geometry, so caches keyed by it (tools/bench) rebuild.
GENERATOR_VERSION = 1


def layer_kinds(g):
    L = g["L"]
    if g["schedule"] == "layer_types":
        local = [t == "hybrid_sliding" for t in g["types"]]
    elif g["schedule"] == "local_layer_ids":
        local = [i in g["local_ids"] for i in range(L)]
    else:
        local = [((i + 1) % 6) != 0 for i in range(L)]
    if "mlp_types" in g:
        sparse = [t == "sparse" for t in g["mlp_types"]]
    else:
        sparse = [i >= g["dense_mlp_idx"] for i in range(L)]
    return local, sparse


# --------------------------------------------------------------------------- generator

_M64 = (1 << 64) - 1


def _fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & _M64
    return h


def uniform(key, n, start=0):
    """n values uniform in [-1, 1): splitmix64 over a counter, keyed by a string; values
    start..start+n-1 of that sequence."""
    with np.errstate(over="ignore"):
        z = np.uint64(_fnv1a64(key)) + (np.arange(start + 1, start + n + 1, dtype=np.uint64)
                                        * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return 2.0 * u - 1.0


class Gen:
    """Named tensors of the counter-based generator; `lazy`: matrices are Uniform tensors,
    generated only when written (make_weights' dict then holds no matrix data)."""

    def __init__(self, seed, geometry, lazy=False):
        self.prefix, self.lazy = f"{seed}/{geometry}/", lazy

    def normal_ish(self, name, shape, std):
        """Uniform with the given std (enough for random weights, exact everywhere)."""
        t = Uniform(self.prefix + name, shape, std * math.sqrt(3.0))
        return t if self.lazy else t.array()

    def around(self, name, shape, centre, spread):
        """centre * (1 + spread*u): norm weights and scales, positive, not all equal."""
        n = int(np.prod(shape))
        return (centre * (1.0 + spread * uniform(self.prefix + name, n))).astype(np.float32).reshape(shape)


# Values a uniform() call makes: its temporaries then stay in L2 (about 3x the rate of one
# call for a whole tensor, measured). Blocks handed to the writer hold about BLOCK values.
CHUNK = 1 << 16
BLOCK = 1 << 20


class Lazy:
    """A tensor made block by block as it is written: `shape`, and `blocks()`, f32 arrays
    of whole rows (the last axis) in row-major order, each about BLOCK values or less."""

    def array(self):
        return np.concatenate([b.reshape(-1) for b in self.blocks()]).reshape(self.shape)


class Uniform(Lazy):
    """uniform(key) × scale as f32 of any shape; rows(r0, r1) are its flat rows r0..r1-1
    (every axis but the last flattened), made in CHUNK pieces: the same values for any
    split, since value i is a function of (key, i) alone."""

    def __init__(self, key, shape, scale):
        self.key, self.shape, self.scale = key, tuple(shape), scale
        self.cols = self.shape[-1]
        self.nrows = int(np.prod(self.shape[:-1]))

    def rows(self, r0, r1):
        n = (r1 - r0) * self.cols
        out = np.empty(n, np.float32)
        for s in range(0, n, CHUNK):
            m = min(CHUNK, n - s)
            out[s:s + m] = uniform(self.key, m, r0 * self.cols + s) * self.scale
        return out.reshape(r1 - r0, self.cols)

    def blocks(self):
        step = max(1, BLOCK // self.cols)
        for r in range(0, self.nrows, step):
            yield self.rows(r, min(self.nrows, r + step))


class FirstRows(Lazy):
    """The first n rows of a 2-D Uniform (the release layout's unpadded lm_head)."""

    def __init__(self, t, n):
        self.t, self.n, self.shape = t, n, (n,) + t.shape[1:]

    def blocks(self):
        step = max(1, BLOCK // self.t.cols)
        for r in range(0, self.n, step):
            yield self.t.rows(r, min(self.n, r + step))


class Interleaved(Lazy):
    """Two Uniforms of shape [..., I, C] as one [..., 2I, C] with rows g0, u0, g1, u1, …
    along the second-to-last axis (the release layout's fused gate/up tensors)."""

    def __init__(self, gate, up):
        self.gate, self.up = gate, up
        self.shape = gate.shape[:-2] + (2 * gate.shape[-2], gate.shape[-1])

    def blocks(self):
        I, C = self.gate.shape[-2], self.gate.shape[-1]
        step = max(1, BLOCK // (2 * C))
        for e in range(self.gate.nrows // I):
            for r in range(e * I, (e + 1) * I, step):
                r1 = min((e + 1) * I, r + step)
                out = np.empty((2 * (r1 - r), C), np.float32)
                out[0::2], out[1::2] = self.gate.rows(r, r1), self.up.rows(r, r1)
                yield out


class Stacked(Lazy):
    """Uniforms of shape [E, I_k, C] joined along the row axis into [E, ΣI_k, C] (the
    transformers layout's grouped gate_up_proj: an expert's gate rows, then its up rows)."""

    def __init__(self, parts):
        self.parts = parts
        E, _, C = parts[0].shape
        self.shape = (E, sum(p.shape[1] for p in parts), C)

    def blocks(self):
        for e in range(self.shape[0]):
            for p in self.parts:
                I = p.shape[1]
                step = max(1, BLOCK // p.cols)
                for r in range(e * I, (e + 1) * I, step):
                    yield p.rows(r, min((e + 1) * I, r + step))


class LazyBytes:
    """A lazy tensor's bytes in the file's dtype, block by block."""

    def __init__(self, lazy, bf16):
        self.lazy, self.bf16 = lazy, bf16

    def __len__(self):
        return int(np.prod(self.lazy.shape)) * (2 if self.bf16 else 4)

    def __iter__(self):
        for a in self.lazy.blocks():
            yield to_bf16_bits(a).astype("<u2").tobytes() if self.bf16 else a.astype("<f4").tobytes()


def make_weights(g, name, seed, lazy=False):
    """Canonical (transformers-style, de-interleaved) weights: {key: f32 array}; `lazy`:
    the matrices as Uniform tensors instead, made only when written."""
    G = Gen(seed, name, lazy)
    D, L = g["D"], g["L"]
    local, sparse = layer_kinds(g)
    w = {}
    w["embed"] = G.normal_ish("embed", (g["vocab"], D), 1.0)
    w["embed_norm"] = G.around("embed_norm", (D,), 1.0, 0.3)
    w["norm"] = G.around("norm", (D,), 1.0, 0.3)
    w["lm_head"] = G.normal_ish("lm_head", (g["vocab"], D), 3.0 * g["mup"] / math.sqrt(D))
    K = g["conv_k"]
    for i in range(L):
        p = f"L{i}."
        H, KV, hd, ext = ((g["swa_heads"], g["swa_kv"], g["swa_hd"], g["window"]) if local[i]
                          else (g["heads"], g["kv"], g["hd"], g["rel_extent"]))
        d_rel = g["d_rel"]
        sd = 1.0 / math.sqrt(D)
        w[p + "attn_norm"] = G.around(p + "attn_norm", (D,), 1.0, 0.3)
        w[p + "mlp_norm"] = G.around(p + "mlp_norm", (D,), 1.0, 0.3)
        w[p + "wq"] = G.normal_ish(p + "wq", (H * hd, D), sd)
        w[p + "wk"] = G.normal_ish(p + "wk", (KV * hd, D), sd)
        w[p + "wv"] = G.normal_ish(p + "wv", (KV * hd, D), sd)
        w[p + "wr"] = G.normal_ish(p + "wr", (H * d_rel, D), sd)
        w[p + "wo"] = G.normal_ish(p + "wo", (D, H * hd), 1.5 / math.sqrt(H * hd))
        # q.k/hd of unit-RMS vectors is tiny; norm weights ~2.5 make attention peaked
        w[p + "q_norm"] = G.around(p + "q_norm", (hd,), 2.5, 0.4)
        w[p + "k_norm"] = G.around(p + "k_norm", (hd,), 2.5, 0.4)
        w[p + "relp"] = G.normal_ish(p + "relp", (d_rel, ext), 1.5 / math.sqrt(d_rel))
        for c, C in (("k_conv", KV * hd), ("v_conv", KV * hd), ("attn_conv", D), ("mlp_conv", D)):
            w[p + c] = G.normal_ish(p + c, (C, 1, K), 0.3)
        if not sparse[i]:
            I = g["dense_inter"]
            w[p + "gate"] = G.normal_ish(p + "gate", (I, D), sd)
            w[p + "up"] = G.normal_ish(p + "up", (I, D), sd)
            w[p + "down"] = G.normal_ish(p + "down", (D, I), 2.0 / math.sqrt(I))
            w[p + "dense_scale"] = G.around(p + "dense_scale", (1,), 1.0, 0.5)
        else:
            E, ns, I = g["E"], g["ns"], g["moe_inter"]
            w[p + "router"] = G.normal_ish(p + "router", (E + ns, D), 1.5 * sd)
            w[p + "router_bias"] = G.normal_ish(p + "router_bias", (E,), 0.15)
            w[p + "router_scale"] = G.around(p + "router_scale", (1,), 1.0, 0.4)
            w[p + "x_gate"] = G.normal_ish(p + "x_gate", (E, I, D), sd)
            w[p + "x_up"] = G.normal_ish(p + "x_up", (E, I, D), sd)
            w[p + "x_down"] = G.normal_ish(p + "x_down", (E, D, I), 2.0 / math.sqrt(I))
            if ns:
                w[p + "s_gate"] = G.normal_ish(p + "s_gate", (ns, I, D), sd)
                w[p + "s_up"] = G.normal_ish(p + "s_up", (ns, I, D), sd)
                w[p + "s_down"] = G.normal_ish(p + "s_down", (ns, D, I), 2.0 / math.sqrt(I))
    if g["audio"]:
        a = g["audio"]
        w["audio_enc"] = G.normal_ish("audio_enc", (a["n_mel_bins"] * a["mel_vocab_size"], D), 1.0)
        w["audio_norm"] = G.around("audio_norm", (D,), 1.0, 0.3)
    return w


def _interleave(gate, up, axis):
    """Hub layout of a fused gate/up tensor: rows g0, u0, g1, u1, ... along `axis` (the
    second-to-last one)."""
    if isinstance(gate, Lazy):
        return Interleaved(gate, up)
    st = np.stack([gate, up], axis=axis + 1)
    shape = list(gate.shape)
    shape[axis] *= 2
    return st.reshape(shape)


def layout_tensors(g, w, layout, embed_norm_name):
    """{file name: {tensor name: f32 array}} for one layout."""
    L = g["L"]
    _, sparse = layer_kinds(g)
    model, audio = {}, {}
    release = layout == "release"

    def put(name_row, a, prefix=""):
        model[prefix + tn.pick(name_row, release)] = a

    def put_gate_up(names, gate, up, axis, prefix):
        """Release: one fused tensor, rows interleaved; transformers: gate and up apart."""
        if release:
            model[prefix + names[0]] = _interleave(gate, up, axis)
        else:
            model[prefix + names[1]], model[prefix + names[2]] = gate, up

    for row in (tn.EMBED, tn.FINAL_NORM):
        put(row, w[row[0]])
    if release or embed_norm_name == "model":
        put(tn.EMBED_NORM, w["embed_norm"])
    else:
        model[tn.EMBED_NORM_IN_EMBED] = w["embed_norm"]
    head = w["lm_head"]
    if release:
        head = FirstRows(head, g["unpad"]) if isinstance(head, Lazy) else head[:g["unpad"]]
    put(tn.LM_HEAD, head)
    for i in range(L):
        s, p = f"L{i}.", tn.layer_prefix(release, i)
        for row in tn.ATTENTION:
            put(row, w[s + row[0]], p)
        if not sparse[i]:
            put_gate_up(tn.DENSE_GATE_UP, w[s + "gate"], w[s + "up"], 0, p)
            for row in tn.DENSE:
                put(row, w[s + row[0]], p)
            continue
        for row in tn.ROUTER:
            put(row, w[s + row[0]], p)
        gate, up = w[s + "x_gate"], w[s + "x_up"]
        if release:
            put(tn.EXPERTS_GATE_UP, _interleave(gate, up, 1), p)
        else:  # grouped: gate rows, then up rows
            put(tn.EXPERTS_GATE_UP, Stacked([gate, up]) if isinstance(gate, Lazy)
                else np.concatenate([gate, up], 1), p)
        put(tn.EXPERTS_DOWN, w[s + "x_down"], p)
        if g["ns"]:
            put_gate_up(tn.SHARED_GATE_UP, w[s + "s_gate"], w[s + "s_up"], 1, p)
            put(tn.SHARED_DOWN, w[s + "s_down"], p)
    if g["audio"]:
        # The release spelling in both layouts: inside the model (release), a sidecar (hf).
        for key, rel, _ in tn.AUDIO:
            (model if release else audio)[rel] = w[key]
    return model, audio


# --------------------------------------------------------------------------- writing

# kept in F32 in bf16 checkpoints, as the released shards do
_F32_SUFFIXES = ("sconv.weight", "conv1d.weight", "mlp.gate.bias", "e_score_correction_bias",
                 "mlp.gate.global_scale")


def to_bf16_bits(a):
    """f32 -> bf16 bit patterns, round to nearest even. In uint32: generated weights are
    finite, and no finite pattern (at most 0xFF7FFFFF) overflows when 0x8000 is added."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    b = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return b.astype(np.uint16)


def encode(tensors, dtype):
    """[(name, dtype string, shape, bytes)] in sorted name order."""
    out = []
    for name in sorted(tensors):
        if isinstance(tensors[name], Lazy):
            t = tensors[name]
            bf16 = dtype == "bf16" and not name.endswith(_F32_SUFFIXES)
            out.append((name, "BF16" if bf16 else "F32", list(t.shape), LazyBytes(t, bf16)))
            continue
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if dtype == "bf16" and not name.endswith(_F32_SUFFIXES):
            out.append((name, "BF16", list(a.shape), to_bf16_bits(a).astype("<u2").tobytes()))
        else:
            out.append((name, "F32", list(a.shape), a.astype("<f4").tobytes()))
    return out


def write_safetensors(path, items):
    header, off = {}, 0
    for name, dt, shape, data in items:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for name, _, _, data in items:
            if isinstance(data, LazyBytes):
                wrote = 0
                for chunk in data:   # each block is dropped once written
                    f.write(chunk)
                    wrote += len(chunk)
                if wrote != len(data):   # the header's offsets would then lie
                    raise SystemExit(f"{path}: {name} wrote {wrote} bytes, its header says {len(data)}")
            else:
                f.write(data)


def config_json(g, layout, dtype):
    local, sparse = layer_kinds(g)
    t = {
        "hidden_size": g["D"], "num_hidden_layers": g["L"], "vocab_size": g["vocab"],
        "unpadded_vocab_size": g["unpad"],
        "num_attention_heads": g["heads"], "num_key_value_heads": g["kv"], "head_dim": g["hd"],
        "swa_num_attention_heads": g["swa_heads"], "swa_num_key_value_heads": g["swa_kv"],
        "swa_head_dim": g["swa_hd"], "sliding_window_size": g["window"],
        "d_rel": g["d_rel"], "rel_extent": g["rel_extent"],
        "log_scaling_n_floor": g["n_floor"], "log_scaling_alpha": g["alpha"],
        "rms_norm_eps": g["eps"], "logits_mup_width_multiplier": g["mup"],
        "n_routed_experts": g["E"], "num_experts_per_tok": g["topk"],
        "n_shared_experts": g["ns"], "route_scale": g["route_scale"],
        "dense_mlp_idx": g["dense_mlp_idx"], "hidden_act": "silu",
    }
    if g["schedule"] == "layer_types":
        t["layer_types"] = g["types"]
        if "decoy_local_ids" in g:
            t["local_layer_ids"] = g["decoy_local_ids"]   # must lose to layer_types
    elif g["schedule"] == "local_layer_ids":
        t["local_layer_ids"] = g["local_ids"]
    if "mlp_types" in g:
        t["mlp_layer_types"] = g["mlp_types"]             # must beat dense_mlp_idx
    torch_dtype = "bfloat16" if dtype == "bf16" else "float32"
    if layout == "release":
        t.update({
            "model_max_length": 1048576, "torch_dtype": torch_dtype, "use_embed_norm": True,
            "use_sconv": True, "sconv_kernel_size": g["conv_k"],
            "dense_intermediate_size": g["dense_inter"], "intermediate_size": g["moe_inter"],
            "use_gate_bias": True, "norm_after_topk": True, "shared_expert_sink": True,
            "gate_activation": "sigmoid", "use_global_scale": True,
            "q_bias": False, "o_bias": False, "final_logit_softcapping": None,
        })
        root = {"architectures": ["InklingForConditionalGeneration"],
                "model_type": "inkling_mm_model", "eos_token_id": g["eos"], "text_config": t}
        if g["audio"]:
            a = g["audio"]
            root["audio_token_id"] = a["token"]
            root["audio_config"] = {"n_mel_bins": a["n_mel_bins"],
                                    "mel_vocab_size": a["mel_vocab_size"]}
        return root
    # flat, as save_pretrained writes it after post_init
    t.update({
        "architectures": ["InklingForCausalLM"], "model_type": "inkling_text",
        "max_position_embeddings": 4096, "torch_dtype": torch_dtype,
        "conv_kernel_size": g["conv_k"],
        "intermediate_size": g["dense_inter"], "moe_intermediate_size": g["moe_inter"],
        "eos_token_id": g["eos"], "tie_word_embeddings": False,
    })
    if g["audio"]:
        a = g["audio"]
        t["audio_token_id"] = a["token"]
        t["audio_config"] = {"n_mel_bins": a["n_mel_bins"], "mel_vocab_size": a["mel_vocab_size"]}
    return t


def suggested_prompt(g, seed):
    """32 ids (> every window) of a fixed pseudo-random draw; audio: 6 placeholders inside."""
    u = uniform(f"{seed}/prompt", 32)
    ids = [int((x + 1) / 2 * g["unpad"]) % g["unpad"] for x in u]
    ids = [t for t in ids if t not in (g["eos"],)]
    if g["audio"]:
        tok = g["audio"]["token"]
        ids = [t for t in ids if t != tok]
        ids = ids[:10] + [tok] * 6 + ids[10:26]
    return ids[:32]


def sample_dmel(g, seed, frames=6):
    a = g["audio"]
    u = uniform(f"{seed}/dmel", frames * a["n_mel_bins"])
    lv = np.floor((u + 1) / 2 * a["mel_vocab_size"]).clip(0, a["mel_vocab_size"] - 1)
    return lv.astype(np.uint8).tobytes()


def with_overrides(geometry, sets):
    """The geometry with integer keys replaced (--set hd=272): fixtures past a limit of one
    consumer, e.g. the Vulkan chain's head dim, bias rank and conv taps (tests/vulkan)."""
    g = dict(GEOMETRIES[geometry])
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or key not in g or not isinstance(g[key], int) or isinstance(g[key], bool):
            ints = sorted(k for k, v in g.items() if isinstance(v, int) and not isinstance(v, bool))
            raise SystemExit(f"--set {item}: expected KEY=INT with KEY one of {', '.join(ints)}")
        try:
            g[key] = int(value)
        except ValueError:
            raise SystemExit(f"--set {item}: {value!r} is not an integer") from None
    return g


def describe(geometry, layout, dtype, seed, embed_norm_name="model", sets=None):
    """What write_fixture would write, without writing it: a key naming the weights (the
    geometry after overrides, layout, dtype, seed, generator version) and the bytes of the
    weight files."""
    g = with_overrides(geometry, sets)
    model, audio = layout_tensors(g, make_weights(g, geometry, seed, lazy=True), layout, embed_norm_name)
    size = sum(len(x[3]) for x in encode(model, dtype)) + sum(len(x[3]) for x in encode(audio, dtype))
    what = json.dumps([GENERATOR_VERSION, geometry, g, layout, dtype, seed, embed_norm_name], sort_keys=True)
    return {"key": hashlib.sha256(what.encode()).hexdigest()[:12], "weight_bytes": size,
            "experts": g["E"], "layers": g["L"]}


def write_fixture(outdir, geometry, layout, dtype, seed, embed_norm_name="model", shards=None, sets=None):
    g = with_overrides(geometry, sets)
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):  # a re-run must not leave stale shards behind
        if f.endswith((".safetensors", ".safetensors.index.json")):
            os.remove(os.path.join(outdir, f))
    w = make_weights(g, geometry, seed, lazy=True)
    model, audio = layout_tensors(g, w, layout, embed_norm_name)
    items = encode(model, dtype)
    if shards is None:
        shards = 2 if layout == "release" else 1
    if shards == 1:
        write_safetensors(os.path.join(outdir, "model.safetensors"), items)
    else:
        total = sum(len(x[3]) for x in items)
        groups, cur, acc = [], [], 0
        for it in items:   # contiguous runs of sorted names, about total/shards bytes each
            if cur and acc >= total * (len(groups) + 1) / shards and len(groups) < shards - 1:
                groups.append(cur)
                cur = []
            cur.append(it)
            acc += len(it[3])
        groups.append(cur)
        wmap = {}
        for k, grp in enumerate(groups):
            fn = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
            write_safetensors(os.path.join(outdir, fn), grp)
            for it in grp:
                wmap[it[0]] = fn
        with open(os.path.join(outdir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2,
                      sort_keys=True)
            f.write("\n")
    if audio:
        write_safetensors(os.path.join(outdir, "audio.safetensors"), encode(audio, dtype))
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(config_json(g, layout, dtype), f, indent=2)
        f.write("\n")
    info = {"geometry": geometry, "layout": layout, "dtype": dtype, "seed": seed,
            "doc": g["doc"], "suggested_prompt": suggested_prompt(g, seed)}
    if sets:
        info["set"] = list(sets)
    if g["audio"]:
        with open(os.path.join(outdir, "sample.dmel"), "wb") as f:
            f.write(sample_dmel(g, seed))
        info["sample_dmel"] = "sample.dmel"
    with open(os.path.join(outdir, "make_tiny.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description="deterministic tiny random Inkling checkpoints")
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--geometry", choices=sorted(GEOMETRIES))
    ap.add_argument("--layout", choices=("release", "hf"), default="hf")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--embed-norm-name", choices=("model", "embed_tokens"), default="model",
                    help="hf layout: model.embed_norm.weight (transformers 5.17) or "
                         "model.embed_tokens.embed_norm.weight")
    ap.add_argument("--shards", type=int, help="weight files (default: release 2, hf 1)")
    ap.add_argument("--set", action="append", metavar="KEY=INT",
                    help="override an integer key of the geometry (repeatable), e.g. hd=272")
    ap.add_argument("--list", action="store_true", help="list geometries and fixtures")
    ap.add_argument("--describe", action="store_true",
                    help="print the fixture's key and weight bytes as JSON; write nothing")
    ap.add_argument("--all", metavar="OUTDIR", help="write every fixture as OUTDIR/<name>/")
    a = ap.parse_args(argv)
    if a.list:
        for n in sorted(GEOMETRIES):
            print(f"{n:8s} {GEOMETRIES[n]['doc']}")
        print("fixtures (--all):", " ".join(f[0] for f in FIXTURES))
        return 0
    if a.all:
        for name, geo, layout, dtype, enn in FIXTURES:
            write_fixture(os.path.join(a.all, name), geo, layout, dtype, a.seed, enn or "model")
        return 0
    if a.describe:
        if not a.geometry:
            ap.error("--describe needs --geometry")
        print(json.dumps(describe(a.geometry, a.layout, a.dtype, a.seed, a.embed_norm_name, a.set)))
        return 0
    if not a.outdir or not a.geometry:
        ap.error("need OUTDIR and --geometry (or --list / --all OUTDIR)")
    if a.shards is not None and a.shards < 1:
        ap.error("--shards must be >= 1")
    write_fixture(a.outdir, a.geometry, a.layout, a.dtype, a.seed, a.embed_norm_name, a.shards, a.set)
    return 0


if __name__ == "__main__":
    sys.exit(main())
