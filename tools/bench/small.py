#!/usr/bin/python3
"""Inkling-Small's speed on this machine, extrapolated from `inkling bench` on the `small`
geometry of tools/make-tiny (its real layer shapes, 6 of its 42 layers, fewer experts).

  small.py BENCH_JSON MODEL_DIR [OUT_JSON]

BENCH_JSON is `inkling bench --model MODEL_DIR` output (prefill.per_layer and
decode.per_layer: each layer's wall time), MODEL_DIR the converted model (config.json,
convert-report.json). Prints how each figure is obtained; OUT_JSON gets the same as JSON.

The extrapolation: a layer's cost depends on its kind (dense or MoE MLP, sliding or global
attention), not on its index, so Inkling-Small's step is embed + lm_head + Σ over its 42
layers of the measured mean cost of that layer's kind. The router is the one part whose
size follows the expert count: its measured time is scaled by (256 + 2) / (E + 2). The
bytes of weights a decode token reads are counted from the shapes (and checked against
what the engine counted on the measured model).
"""

import json
import os
import sys

# Inkling-Small's released config (docs/model.md, "Config"): 42 layers, every 6th global
# (5, 11, …, 41), dense MLP on layers 0-1 (dense_mlp_idx 2), 256 routed experts, top-6,
# 2 shared.
REAL = {"name": "Inkling-Small", "layers": 42, "dense_mlp_idx": 2, "experts": 256, "topk": 6, "shared": 2}


def real_kinds(r):
    return [("moe" if i >= r["dense_mlp_idx"] else "dense", "global" if (i + 1) % 6 == 0 else "sliding")
            for i in range(r["layers"])]


def text_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    return c.get("text_config", c)


def by_kind(per_layer):
    """{(mlp, attention): [layer rows]} of one phase's per-layer figures."""
    kinds = {}
    for row in per_layer["layers"]:
        kinds.setdefault((row["mlp"], row["attention"]), []).append(row)
    return kinds


def decode_bytes(c, record_bytes, experts, topk, shared, layers_kinds, vocab_rows):
    """Weight bytes one decode token reads, from the shapes: bf16 attention, dense MLPs,
    shared experts and lm_head; the F32 router; `topk` int4 records a MoE layer."""
    D = c["hidden_size"]
    H, KV, hd, d_rel = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["d_rel"]
    Hs, KVs, hds = c["swa_num_attention_heads"], c["swa_num_key_value_heads"], c["swa_head_dim"]
    I_d, I = c["dense_intermediate_size"], c["intermediate_size"]
    total = vocab_rows * D * 2  # lm_head, bf16
    for mlp, attn in layers_kinds:
        h, kv, d = (H, KV, hd) if attn == "global" else (Hs, KVs, hds)
        total += (2 * h * d * D + 2 * kv * d * D + h * d_rel * D) * 2   # q, o; k, v; r
        if mlp == "dense":
            total += 3 * D * I_d * 2
        else:
            total += (experts + shared) * D * 4 + shared * 3 * D * I * 2 + topk * record_bytes
    return total


def extrapolate(bench, model_dir):
    c = text_config(model_dir)
    with open(os.path.join(model_dir, "convert-report.json")) as f:
        report = json.load(f)
    E = c["n_routed_experts"]
    measured_kinds = [(("moe" if i >= c["dense_mlp_idx"] else "dense"),
                       ("global" if (i + 1) % 6 == 0 else "sliding")) for i in range(c["num_hidden_layers"])]
    kinds_real = real_kinds(REAL)
    router_scale = (REAL["experts"] + REAL["shared"]) / (E + c["n_shared_experts"])
    out = {"model": model_dir, "threads": bench["threads"], "isa": bench["isa"],
           "memory_bandwidth_gb_s": bench["memory_bandwidth_gb_s"], "measured_experts": E,
           "real": REAL, "router_scale": router_scale, "phases": {}}
    lines = []
    n_moe = sum(1 for k in measured_kinds if k[0] == "moe")
    for phase in ("prefill", "decode"):
        pl = bench[phase]["per_layer"]
        tokens = pl["tokens"]
        groups = by_kind(pl)
        router_per_layer = pl["phases_ms"]["router"] / max(n_moe, 1) / max(tokens, 1)
        kinds = {}
        for k, rows in sorted(groups.items()):
            v = [r["ms_per_token"] for r in rows]
            kinds[f"{k[0]}+{k[1]}"] = {"layers": [r["layer"] for r in rows], "ms_per_token": sum(v) / len(v),
                                       "min": min(v), "max": max(v)}
        total = pl["embed"]["ms_per_token"] + pl["lm_head"]["ms_per_token"]
        counts = {}
        for k in kinds_real:
            name = f"{k[0]}+{k[1]}"
            if name not in kinds:
                raise SystemExit(f"small.py: Inkling-Small has {name} layers, the benchmark measured none")
            extra = router_per_layer * (router_scale - 1) if k[0] == "moe" else 0.0
            total += kinds[name]["ms_per_token"] + extra
            counts[name] = counts.get(name, 0) + 1
        measured_total = sum(r["ms_per_token"] for r in pl["layers"]) + pl["embed"]["ms_per_token"] + \
            pl["lm_head"]["ms_per_token"]
        out["phases"][phase] = {
            "tokens": tokens, "kinds": kinds, "embed_ms_per_token": pl["embed"]["ms_per_token"],
            "lm_head_ms_per_token": pl["lm_head"]["ms_per_token"], "router_ms_per_layer_token": router_per_layer,
            "real_layer_counts": counts, "measured_model_ms_per_token": measured_total,
            "measured_model_tok_s": bench[phase]["tok_s"], "real_ms_per_token": total, "real_tok_s": 1e3 / total}
        what = ("decode, ms a token (%d tokens after the prompt)" % tokens if phase == "decode"
                else "prefill, ms a prompt token (one %d-token prompt)" % tokens)
        lines.append(f"  {what}:")
        lines.append("    measured per layer: " + "; ".join(
            f"{k} {v['ms_per_token']:.2f} (layers {','.join(map(str, v['layers']))}, {v['min']:.2f}-{v['max']:.2f})"
            for k, v in kinds.items()) + f"; embed {pl['embed']['ms_per_token']:.3f}, lm_head "
            f"{pl['lm_head']['ms_per_token']:.2f}")
        lines.append(f"    {REAL['name']}: embed + lm_head + " + " + ".join(f"{n} x {k}" for k, n in counts.items()) +
                     f" + router x {router_scale:.2f} = {total:.1f} ms = {1e3 / total:.2f} tok/s"
                     f" (the measured 6-layer model: {bench[phase]['tok_s']:.2f} tok/s)")
    record = report["experts"]["record_bytes"]
    U = c["unpadded_vocab_size"]
    counted = decode_bytes(c, record, E, c["num_experts_per_tok"], c["n_shared_experts"], measured_kinds, U)
    real_bytes = decode_bytes(c, record, REAL["experts"], REAL["topk"], REAL["shared"], kinds_real, U)
    engine_bytes = bench["decode"]["weight_bytes_per_token"]
    dec = out["phases"]["decode"]
    out["decode_bytes"] = {"engine_counted_measured_model": engine_bytes, "shapes_measured_model": counted,
                           "shapes_real": real_bytes,
                           "real_gb_s": real_bytes * dec["real_tok_s"] / 1e9,
                           "bandwidth_bound_tok_s": bench["memory_bandwidth_gb_s"] * 1e9 / real_bytes}
    lines.append(f"  weights a decode token reads: the engine counted {engine_bytes / 1e9:.3f} GB on the measured "
                 f"model, the shapes give {counted / 1e9:.3f} GB; {REAL['name']}: {real_bytes / 1e9:.2f} GB from "
                 f"its shapes ({record / 1e6:.1f} MB an int4 expert), so {dec['real_tok_s']:.2f} tok/s reads "
                 f"{out['decode_bytes']['real_gb_s']:.1f} GB/s of the {bench['memory_bandwidth_gb_s']:.1f} GB/s "
                 f"measured (all of it would allow {out['decode_bytes']['bandwidth_bound_tok_s']:.2f} tok/s)")
    out["convert"] = {"seconds": report["seconds"], "mb_per_s": report["mb_per_s"],
                      "source_matrix_bytes": report["source_matrix_bytes"], "output_bytes": report["output_bytes"],
                      "files": report["files"]}
    lines.append(f"  convert (--experts int4): {report['source_matrix_bytes'] / 1e9:.1f} GB of bf16 matrices in "
                 f"{report['seconds']:.0f} s = {report['mb_per_s']:.0f} MB/s, output {report['output_bytes'] / 1e9:.1f} GB")
    head = (f"[bench] {os.path.basename(model_dir.rstrip('/'))}: Inkling-Small's layer shapes, "
            f"{c['num_hidden_layers']} layers, {E} experts (int4, all resident), bf16 dense; "
            f"{bench['threads']} threads, {bench['isa']}, {bench['memory_bandwidth_gb_s']:.1f} GB/s measured")
    return out, [head] + lines


def main(argv):
    if len(argv) not in (3, 4):
        raise SystemExit(__doc__.split("\n\n")[1])
    with open(argv[1]) as f:
        bench = json.load(f)
    out, lines = extrapolate(bench, argv[2])
    print("\n".join(lines), file=sys.stderr)
    if len(argv) == 4:
        with open(argv[3], "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
