#!/usr/bin/python3
"""Sizes of the real Inkling checkpoints, from their configs (docs/models.md).

  model_sizes.py [--json]

Parameter counts come from the released config values and the tensor shapes (docs/model.md,
"Config" and "Checkpoint layouts"); bytes are parameters x the bytes each is stored in:
bf16 checkpoints (F32 for the short convs and router bias, as released); `inkling convert` output with int4 experts (half
a byte a weight + an f32 scale per 32), int8 experts (a byte a weight + an f32 scale a row),
the other matrices kept bf16, the router in F32 (docs/convert.md, docs/container.md). Only
the text model and its audio tower are counted: the vision tower and the MTP layers in the
download are not used by the engine (the published total of Inkling, 975B, includes them).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from small import decode_bytes  # noqa: E402

_SMALL = {"hidden_size": 4096, "num_hidden_layers": 42, "vocab_size": 201024, "unpadded_vocab_size": 200058,
          "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "swa_num_attention_heads": 32,
          "swa_num_key_value_heads": 8, "swa_head_dim": 128, "sliding_window_size": 512, "d_rel": 16,
          "rel_extent": 1024, "sconv_kernel_size": 4, "n_routed_experts": 256, "num_experts_per_tok": 6,
          "n_shared_experts": 2, "dense_mlp_idx": 2, "dense_intermediate_size": 16384, "intermediate_size": 2048}
_LARGE = dict(_SMALL, hidden_size=6144, num_hidden_layers=66, num_attention_heads=64, swa_num_attention_heads=64,
              swa_num_key_value_heads=16, dense_intermediate_size=24576, intermediate_size=3072)
MODELS = {"Inkling-Small": _SMALL, "Inkling": _LARGE}
AUDIO_ROWS = 80 * 16   # n_mel_bins x mel_vocab_size (audio_config)


def kinds(c):
    return [("moe" if i >= c["dense_mlp_idx"] else "dense", "global" if (i + 1) % 6 == 0 else "sliding")
            for i in range(c["num_hidden_layers"])]


def parts(c):
    """Parameters by part: {part: (count, bytes each in the bf16 checkpoint)}."""
    D, K = c["hidden_size"], c["sconv_kernel_size"]
    E, S, I, I_d = c["n_routed_experts"], c["n_shared_experts"], c["intermediate_size"], c["dense_intermediate_size"]
    p = {k: 0 for k in ("embed", "lm_head", "attention", "dense_mlp", "routed_experts", "shared_experts", "router",
                        "router_bias_convs", "norms_banks", "audio")}
    p["embed"] = c["vocab_size"] * D
    p["lm_head"] = c["unpadded_vocab_size"] * D
    p["audio"] = AUDIO_ROWS * D + D
    p["norms_banks"] = 2 * D
    for mlp, attn in kinds(c):
        local = attn == "sliding"
        H = c["swa_num_attention_heads"] if local else c["num_attention_heads"]
        KV = c["swa_num_key_value_heads"] if local else c["num_key_value_heads"]
        hd = c["swa_head_dim"] if local else c["head_dim"]
        ext = c["sliding_window_size"] if local else c["rel_extent"]
        p["attention"] += 2 * H * hd * D + 2 * KV * hd * D + H * c["d_rel"] * D
        p["norms_banks"] += 2 * D + 2 * hd + c["d_rel"] * ext
        p["router_bias_convs"] += 2 * KV * hd * K + 2 * D * K
        if mlp == "dense":
            p["dense_mlp"] += 3 * D * I_d
            p["norms_banks"] += 1
        else:
            p["routed_experts"] += E * 3 * I * D
            p["shared_experts"] += S * 3 * I * D
            p["router"] += (E + S) * D
            p["router_bias_convs"] += E + 1
    return p


def sizes(name):
    c = MODELS[name]
    p = parts(c)
    total = sum(p.values())
    f32 = p["router_bias_convs"]
    bf16_bytes = 2 * (total - f32) + 4 * f32
    I, D = c["intermediate_size"], c["hidden_size"]
    E_total = p["routed_experts"]
    int4_record = 3 * I * D // 2 + 3 * I * D // 32 * 4         # values + an f32 scale per 32
    int8_record = 3 * I * D + 4 * (2 * I + D)                   # values + an f32 scale a row
    records = E_total // (3 * I * D)
    # model.safetensors of a conversion: everything but the routed experts and the audio
    # tower, matrices kept bf16, the router and scalars F32.
    dense = bf16_bytes - 2 * E_total - 2 * p["audio"] + 2 * p["router"]
    moe_layers = sum(1 for k in kinds(c) if k[0] == "moe")
    active = (p["attention"] + p["dense_mlp"] + p["lm_head"] + D
              + moe_layers * (c["num_experts_per_tok"] + c["n_shared_experts"]) * 3 * I * D
              + p["router"])
    return {
        "params": p, "params_total": total, "params_active_per_token": active,
        "checkpoint_bf16_bytes": bf16_bytes, "audio_bytes_bf16": 2 * p["audio"],
        "routed_expert_records": records, "moe_layers": moe_layers,
        "int4": {"record_bytes": int4_record, "experts_inkx": records * int4_record, "model_safetensors": dense,
                 "decode_bytes_per_token": decode_bytes(c, int4_record, c["n_routed_experts"],
                                                        c["num_experts_per_tok"], c["n_shared_experts"], kinds(c),
                                                        c["unpadded_vocab_size"])},
        "int8": {"record_bytes": int8_record, "experts_inkx": records * int8_record, "model_safetensors": dense,
                 "decode_bytes_per_token": decode_bytes(c, int8_record, c["n_routed_experts"],
                                                        c["num_experts_per_tok"], c["n_shared_experts"], kinds(c),
                                                        c["unpadded_vocab_size"])},
    }


def main(argv):
    out = {name: sizes(name) for name in MODELS}
    if "--json" in argv:
        print(json.dumps(out, indent=2))
        return 0
    G = 1e9
    for name, s in out.items():
        print(f"{name}: {s['params_total'] / G:.1f} B parameters (text + audio), "
              f"{s['params_active_per_token'] / G:.1f} B read per decoded token")
        for k, v in s["params"].items():
            print(f"  {k:18s} {v / G:10.3f} B")
        print(f"  checkpoint (bf16)          {s['checkpoint_bf16_bytes'] / G:8.1f} GB   audio tower {s['audio_bytes_bf16'] / 1e6:.1f} MB")
        for q in ("int4", "int8"):
            z = s[q]
            print(f"  converted, {q} experts: experts.inkx {z['experts_inkx'] / G:.1f} GB ({s['routed_expert_records']} "
                  f"records of {z['record_bytes'] / 1e6:.1f} MB), model.safetensors {z['model_safetensors'] / G:.1f} GB; "
                  f"decode reads {z['decode_bytes_per_token'] / G:.2f} GB/token")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
