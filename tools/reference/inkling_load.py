"""Inkling config and weights, as the reference understands them.

Config (docs/model.md, "Config"): the released config.json nests the text model under
`text_config` and keeps eos_token_id, audio_token_id and audio_config at the root; a
save_pretrained config is flat.

Weights (docs/model.md, "Checkpoint layouts"): the release layout (`model.llm.*`, fused
gate/up rows interleaved g0,u0,g1,u1,...) and the transformers layout (`model.layers.N.*`,
gate rows then up rows). Both are mapped to one canonical set of float tensors, shape-checked
against the config.
"""

import json
import os
import sys

import numpy as np

import tensor_names as tn
from safetensors_read import SafetensorsError, open_model_dir


class ModelError(Exception):
    pass


# --------------------------------------------------------------------------- config

class Config:
    pass


def _pick(d, key, default, aliases=()):
    """Value of `key` (or one alias) in d; None/absent -> default; conflicting aliases -> error."""
    found = [(k, d[k]) for k in (key,) + tuple(aliases) if k in d and d[k] is not None]
    if not found:
        return default
    vals = {json.dumps(v, sort_keys=True) for _, v in found}
    if len(vals) > 1:
        raise ModelError("config.json: conflicting values for aliased keys "
                         + ", ".join(f"{k}={v!r}" for k, v in found))
    return found[0][1]


def _int(d, key, default, aliases=(), minimum=1):
    v = _pick(d, key, default, aliases)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ModelError(f"config.json: {key} must be an integer >= {minimum}, found {v!r}")
    return v


def _float(d, key, default, aliases=()):
    v = _pick(d, key, default, aliases)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ModelError(f"config.json: {key} must be a number, found {v!r}")
    return float(v)


def parse_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            root = json.load(f)
    except FileNotFoundError:
        raise ModelError(f"{model_dir}: no config.json") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(root, dict):
        raise ModelError(f"{path}: not a JSON object")
    tc = root.get("text_config")
    nested = isinstance(tc, dict)
    t = tc if nested else root

    c = Config()
    c.nested = nested
    c.D = _int(t, "hidden_size", 6144)
    c.L = _int(t, "num_hidden_layers", 66)
    c.vocab = _int(t, "vocab_size", 201024)
    c.unpad_vocab = _int(t, "unpadded_vocab_size", c.vocab)
    if c.unpad_vocab > c.vocab:
        raise ModelError(f"config.json: unpadded_vocab_size {c.unpad_vocab} > vocab_size {c.vocab}")
    c.heads = _int(t, "num_attention_heads", 64)
    c.kv = _int(t, "num_key_value_heads", 8)
    c.hd = _int(t, "head_dim", 128)
    c.swa_heads = _int(t, "swa_num_attention_heads", c.heads)
    c.swa_kv = _int(t, "swa_num_key_value_heads", 16)
    c.swa_hd = _int(t, "swa_head_dim", c.hd)
    for h, k, what in ((c.heads, c.kv, "num_attention_heads/num_key_value_heads"),
                       (c.swa_heads, c.swa_kv, "swa_num_attention_heads/swa_num_key_value_heads")):
        if h % k:
            raise ModelError(f"config.json: {what} = {h}/{k} is not a whole number of groups")
    c.window = _int(t, "sliding_window_size", 512, aliases=("sliding_window",))
    c.d_rel = _int(t, "d_rel", 16)
    c.rel_extent = _int(t, "rel_extent", 1024)
    nf = _pick(t, "log_scaling_n_floor", None)
    if nf is not None and (isinstance(nf, bool) or not isinstance(nf, (int, float))):
        raise ModelError(f"config.json: log_scaling_n_floor must be a number or null, found {nf!r}")
    # null (transformers) or <= 0 (colibri) both mean "no tau"
    c.n_floor = float(nf) if nf is not None and nf > 0 else None
    c.alpha = _float(t, "log_scaling_alpha", 0.1)
    c.conv_k = _int(t, "conv_kernel_size", 4, aliases=("sconv_kernel_size",))
    c.E = _int(t, "n_routed_experts", 256, aliases=("num_local_experts",))
    c.topk = _int(t, "num_experts_per_tok", 6)
    c.ns = _int(t, "n_shared_experts", 2, minimum=0)
    c.eps = _float(t, "rms_norm_eps", 1e-6)
    c.route_scale = _float(t, "route_scale", 8.0)
    c.mup = _float(t, "logits_mup_width_multiplier", 24.0, aliases=("embedding_multiplier",))

    # widths: dense_intermediate_size marks the released style, whose intermediate_size is
    # the EXPERT width; an explicit moe_intermediate_size always wins for the experts.
    if "dense_intermediate_size" in t and t["dense_intermediate_size"] is not None:
        c.dense_inter = _int(t, "dense_intermediate_size", 0)
        c.moe_inter = _int(t, "moe_intermediate_size", _int(t, "intermediate_size", 3072))
    else:
        c.dense_inter = _int(t, "intermediate_size", 24576)
        c.moe_inter = _int(t, "moe_intermediate_size", 3072)

    # local (sliding) vs global layers: layer_types > local_layer_ids > every 6th global
    lt = t.get("layer_types")
    if lt is not None:
        if (not isinstance(lt, list) or len(lt) != c.L
                or not all(x in ("hybrid", "hybrid_sliding") for x in lt)):
            raise ModelError(f"config.json: layer_types must list {c.L} entries of "
                             f"\"hybrid\"/\"hybrid_sliding\", found {lt!r}")
        c.local = [x == "hybrid_sliding" for x in lt]
    elif t.get("local_layer_ids") is not None:
        ids = t["local_layer_ids"]
        if not isinstance(ids, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < c.L for i in ids):
            raise ModelError(f"config.json: local_layer_ids must be layer ids in [0, {c.L}), "
                             f"found {ids!r}")
        s = set(ids)
        c.local = [i in s for i in range(c.L)]
    else:
        c.local = [((i + 1) % 6) != 0 for i in range(c.L)]

    # dense vs MoE MLP: mlp_layer_types > dense_mlp_idx (default 0: all MoE)
    mt = t.get("mlp_layer_types")
    if mt is not None:
        if (not isinstance(mt, list) or len(mt) != c.L
                or not all(x in ("dense", "sparse") for x in mt)):
            raise ModelError(f"config.json: mlp_layer_types must list {c.L} entries of "
                             f"\"dense\"/\"sparse\", found {mt!r}")
        c.sparse = [x == "sparse" for x in mt]
    else:
        dmi = _int(t, "dense_mlp_idx", 0, minimum=0)
        c.sparse = [i >= dmi for i in range(c.L)]
    if any(c.sparse) and c.topk > c.E:
        raise ModelError(f"config.json: num_experts_per_tok {c.topk} > n_routed_experts {c.E}")

    # root-level keys (eos falls back to text_config)
    eos = root.get("eos_token_id", t.get("eos_token_id") if nested else None)
    if eos is None:
        c.eos = set()
    elif isinstance(eos, int) and not isinstance(eos, bool):
        c.eos = {eos}
    elif isinstance(eos, list) and all(isinstance(x, int) for x in eos):
        c.eos = set(eos)
    else:
        raise ModelError(f"config.json: eos_token_id must be an int, a list or null, found {eos!r}")
    c.audio_tok = _int(root, "audio_token_id", 200023, minimum=0)
    ac = root.get("audio_config") or {}
    if not isinstance(ac, dict):
        raise ModelError("config.json: audio_config must be an object")
    c.has_audio_config = bool(ac)
    c.mel_bins = _int(ac, "n_mel_bins", 80)
    c.mel_vocab = _int(ac, "mel_vocab_size", 16)
    return c


def layer_geom(c, i):
    """(heads, kv heads, head dim, bias extent) of layer i."""
    if c.local[i]:
        return c.swa_heads, c.swa_kv, c.swa_hd, c.window
    return c.heads, c.kv, c.hd, c.rel_extent


def describe(c):
    kinds = "".join(("L" if c.local[i] else "G") + ("m" if c.sparse[i] else "d") for i in range(c.L))
    return (f"D={c.D} L={c.L} vocab={c.vocab}/{c.unpad_vocab} heads={c.heads}/{c.kv}x{c.hd} "
            f"swa={c.swa_heads}/{c.swa_kv}x{c.swa_hd} W={c.window} d_rel={c.d_rel} "
            f"rel_ext={c.rel_extent} n_floor={c.n_floor} K_c={c.conv_k} E={c.E} k={c.topk} "
            f"ns={c.ns} I_d={c.dense_inter} I={c.moe_inter} mup={c.mup} layers={kinds}")


# --------------------------------------------------------------------------- weights

def _deinterleave(w, axis):
    """Hub w13 rows are g0,u0,g1,u1,...: even rows are the gate, odd rows the up."""
    sl_g = [slice(None)] * w.ndim
    sl_u = [slice(None)] * w.ndim
    sl_g[axis] = slice(0, None, 2)
    sl_u[axis] = slice(1, None, 2)
    return w[tuple(sl_g)], w[tuple(sl_u)]


class _Reader:
    """Reads tensors by name, checks shapes, and records which names were used."""

    def __init__(self, ts):
        self.ts = ts
        self.used = set()

    def has(self, name):
        return name in self.ts

    def get(self, name, shape, what=None):
        if name not in self.ts:
            raise ModelError(f"missing tensor {name}" + (f" ({what})" if what else ""))
        found = tuple(self.ts.shape(name))
        if found != tuple(shape):
            raise ModelError(f"tensor {name}: expected shape {list(shape)}, found {list(found)}")
        self.used.add(name)
        return self.ts.read(name)

    def scalar(self, name):
        """A learned scalar ([1] or []); absent -> 1.0."""
        if name not in self.ts:
            return None
        found = tuple(self.ts.shape(name))
        if found not in ((), (1,)):
            raise ModelError(f"tensor {name}: expected shape [1], found {list(found)}")
        self.used.add(name)
        return float(self.ts.read(name).reshape(-1)[0])

    def first(self, names, shape, what):
        for n in names:
            if n in self.ts:
                return self.get(n, shape)
        raise ModelError(f"missing tensor {what}: none of {', '.join(names)}")


def load_weights(model_dir, c):
    """Canonical weights as numpy float32 arrays (float64 conversion happens later)."""
    try:
        ts = open_model_dir(model_dir)
    except SafetensorsError as e:
        raise ModelError(str(e)) from None
    names = set(ts.names())
    # transformers' multimodal class nests the text model one level deeper
    if any(n.startswith("model.language_model.") for n in names):
        for n in list(ts.where):
            if n.startswith("model.language_model."):
                new = "model." + n[len("model.language_model."):]
                f = ts.where.pop(n)
                f.entries[new] = f.entries.pop(n)
                ts.where[new] = f
        names = set(ts.names())
    if any(n.startswith(tn.RELEASE_PREFIX) for n in names):
        layout = "release"
    elif tn.pick(tn.EMBED, False) in names or any(n.startswith("model.layers.") for n in names):
        layout = "hf"
    else:
        raise ModelError(f"{model_dir}: neither model.llm.* (release) nor model.layers.* "
                         f"(transformers) tensors found")
    release = layout == "release"
    r = _Reader(ts)
    D, V = c.D, c.vocab
    W = {"layout": layout, "layers": []}

    W["embed"] = r.get(tn.pick(tn.EMBED, release), (V, D))
    en = [n for n in (tn.pick(tn.EMBED_NORM, release),) + (() if release else (tn.EMBED_NORM_IN_EMBED,)) if n in ts]
    if len(en) > 1:
        raise ModelError(f"both {en[0]} and {en[1]} are present; which one is the embed norm is ambiguous")
    W["embed_norm"] = r.get(en[0], (D,)) if en else None
    W["norm"] = r.get(tn.pick(tn.FINAL_NORM, release), (D,))
    un = tn.pick(tn.LM_HEAD, release)
    rows = ts.shape(un)[0] if un in ts else V
    if rows not in (V, c.unpad_vocab):
        raise ModelError(f"tensor {un}: expected shape [{V}, {D}] or [{c.unpad_vocab}, {D}], "
                         f"found {list(ts.shape(un))}")
    W["lm_head"] = r.get(un, (rows, D))[:c.unpad_vocab]

    K = c.conv_k
    for i in range(c.L):
        H, KV, hd, ext = layer_geom(c, i)
        kvd = KV * hd
        p = tn.layer_prefix(release, i)

        def name(row):
            return p + tn.pick(row, release)

        shapes = {"attn_norm": (D,), "mlp_norm": (D,), "wq": (H * hd, D), "wk": (kvd, D), "wv": (kvd, D),
                  "wr": (H * c.d_rel, D), "wo": (D, H * hd), "q_norm": (hd,), "k_norm": (hd,),
                  "k_conv": (kvd, 1, K), "v_conv": (kvd, 1, K), "attn_conv": (D, 1, K), "mlp_conv": (D, 1, K),
                  "relp": (c.d_rel, ext)}
        w = {row[0]: r.get(name(row), shapes[row[0]]) for row in tn.ATTENTION}
        for k in ("k_conv", "v_conv", "attn_conv", "mlp_conv"):
            w[k] = w[k][:, 0, :]
        if not c.sparse[i]:
            I = c.dense_inter
            fused, gate, up = tn.DENSE_GATE_UP
            if release:
                w["gate"], w["up"] = _deinterleave(r.get(p + fused, (2 * I, D)), 0)
            else:
                w["gate"], w["up"] = r.get(p + gate, (I, D)), r.get(p + up, (I, D))
            down, scale = tn.DENSE
            w["down"] = r.get(name(down), (D, I))
            w["dense_scale"] = r.scalar(name(scale))
        else:
            I, E, S = c.moe_inter, c.E, c.ns
            router, bias, scale = tn.ROUTER
            w["router"] = r.get(name(router), (E + S, D))
            w["router_bias"] = r.get(name(bias), (E,))
            w["router_scale"] = r.scalar(name(scale))
            gu = r.get(name(tn.EXPERTS_GATE_UP), (E, 2 * I, D))
            w["x_gate"], w["x_up"] = _deinterleave(gu, 1) if release else (gu[:, :I, :], gu[:, I:, :])
            w["x_down"] = r.get(name(tn.EXPERTS_DOWN), (E, D, I))
            if S:
                fused, gate, up = tn.SHARED_GATE_UP
                if release:
                    w["s_gate"], w["s_up"] = _deinterleave(r.get(p + fused, (S, 2 * I, D)), 1)
                else:
                    w["s_gate"], w["s_up"] = r.get(p + gate, (S, I, D)), r.get(p + up, (S, I, D))
                w["s_down"] = r.get(name(tn.SHARED_DOWN), (S, D, I))
        for k in ("dense_scale", "router_scale"):
            if k in w and w[k] is None:
                w[k] = 1.0
        W["layers"].append(w)

    # audio tower (in the model or in the audio.safetensors sidecar, in either spelling)
    (_, *enc_names), (_, *nrm_names) = tn.AUDIO
    if any(n in ts for n in enc_names):
        W["audio_enc"] = r.first(enc_names, (c.mel_bins * c.mel_vocab, D), "audio encoder")
        W["audio_norm"] = r.first(nrm_names, (D,), "audio final norm")
    else:
        W["audio_enc"] = W["audio_norm"] = None

    ignored = sorted(n for n in names - r.used
                     if not n.startswith(("model.visual.", "model.mtp.", "mtp.")))
    for n in ignored:
        print(f"inkling_ref: warning: tensor {n} is not used", file=sys.stderr)
    return W
