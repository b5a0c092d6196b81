#!/usr/bin/env python3
"""Checks a directory written by `inkling convert` against its source, from the spec
(docs/container.md), not from the converter's code: experts.inkx's header, table, every
record's CRC and every dequantized element (within scale/2 of the source); model.safetensors
(no holes, the transformers names the loader reads, dtypes, values); config.json byte for
byte. Prints what is wrong and exits 1, or prints "ok" and exits 0.

usage: check_convert.py SRC DST --experts int4|int8 --dense keep|int8|int4g64 [--keep-audio]
"""
import argparse
import glob
import json
import os
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tools", "reference"))
import tensor_names as tn  # noqa: E402

problems = []


def fail(msg):
    problems.append(msg)


def read_safetensors(path):
    """name -> (dtype, shape, raw bytes); checks the data region has no holes."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out, spans = {}, []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        s, t = e["data_offsets"]
        spans.append((s, t, name))
        out[name] = (e["dtype"], e["shape"], data[8 + n + s:8 + n + t])
    spans.sort()
    at = 0
    for s, t, name in spans:
        if s != at:
            fail(f"{path}: {name} starts at {s}, the previous tensor ends at {at} (hole or overlap)")
        at = t
    if 8 + n + at != len(data):
        fail(f"{path}: tensors end at {8 + n + at}, the file is {len(data)} bytes")
    return out


def to_f32(dtype, shape, raw):
    if dtype == "F32":
        return np.frombuffer(raw, "<f4").reshape(shape)
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float32).reshape(shape)
    raise ValueError(dtype)


# Release name -> transformers name (tools/reference/tensor_names.py), for the tensors that
# are one array under two names: the whole-model ones and the audio tower in full, a layer's
# after its prefix.
TOP = {rel: hf for _, rel, hf in tn.TOP + tn.AUDIO}
LAYER = {rel: hf for _, rel, hf in tn.ATTENTION + tn.DENSE + tn.ROUTER + [tn.SHARED_DOWN]}


def source_in_transformers_names(src):
    """The source's tensors under the names the converter writes: name -> (dtype, f32 array),
    and the routed experts: layer -> (gate [E,I,D], up [E,I,D], down [E,D,I])."""
    tensors = {}
    for path in sorted(glob.glob(os.path.join(src, "*.safetensors"))):
        for name, (dtype, shape, raw) in read_safetensors(path).items():
            tensors[name] = (dtype, to_f32(dtype, shape, raw))
    out, routed = {}, {}
    release = any(n.startswith(tn.RELEASE_PREFIX) for n in tensors)
    experts_gate_up, experts_down = tn.pick(tn.EXPERTS_GATE_UP, release), tn.pick(tn.EXPERTS_DOWN, release)
    for name, (dtype, a) in tensors.items():
        if name in TOP:
            out[TOP[name]] = (dtype, a)
            continue
        if name == tn.EMBED_NORM_IN_EMBED:
            name = tn.pick(tn.EMBED_NORM, False)
        in_layer = tn.split_layer_name(name)
        if in_layer is None:
            out[name] = (dtype, a)
            continue
        layer, rest = in_layer
        p = tn.layer_prefix(False, layer)
        if rest == experts_gate_up:  # release: rows interleaved; transformers: gate rows, then up
            i = a.shape[1] // 2
            gate, up = (a[:, 0::2], a[:, 1::2]) if release else (a[:, :i], a[:, i:])
            routed.setdefault(layer, {})["gate"], routed[layer]["up"] = gate, up
        elif rest == experts_down:
            routed.setdefault(layer, {})["down"] = a
        elif not release:
            out[name] = (dtype, a)
        elif rest == tn.DENSE_GATE_UP[0]:
            out[p + tn.DENSE_GATE_UP[1]], out[p + tn.DENSE_GATE_UP[2]] = (dtype, a[0::2]), (dtype, a[1::2])
        elif rest == tn.SHARED_GATE_UP[0]:
            out[p + tn.SHARED_GATE_UP[1]] = (dtype, a[:, 0::2])
            out[p + tn.SHARED_GATE_UP[2]] = (dtype, a[:, 1::2])
        else:
            out[p + LAYER[rest]] = (dtype, a)
    return out, routed


QUANTIZABLE = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "r_proj.weight", "o_proj.weight",
               "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight", "shared_experts.gate_proj",
               "shared_experts.up_proj", "shared_experts.down_proj", "lm_head.weight")
KEPT = ("model.embed_tokens.weight", "model.audio_tower.embed_audio_tokens.embed_audio_tokens.weight")


def unpack(fmt, q_raw, rows, padded):
    if fmt == "int8":
        return np.frombuffer(q_raw, np.int8).reshape(rows, padded).astype(np.int32)
    b = np.frombuffer(q_raw, np.uint8).reshape(rows, padded // 2)
    lo, hi = (b & 0xF).astype(np.int32), (b >> 4).astype(np.int32)
    q = np.empty((rows, padded), np.int32)
    q[:, 0::2], q[:, 1::2] = lo, hi
    return np.where(q >= 8, q - 16, q)


def check_quantized(what, w, q, scales, group):
    """w [rows, cols] f32 source; q [rows, padded] ints; scales [rows, groups]."""
    rows, cols = w.shape
    limit = 127 if group == 0 else 7
    if np.abs(q).max(initial=0) > limit:
        fail(f"{what}: a value beyond ±{limit}")
    if q[:, cols:].any():
        fail(f"{what}: non-zero padding columns")
    g = q.shape[1] if group == 0 else group
    s = np.repeat(scales, g, axis=1)[:, :q.shape[1]]
    deq = q * s
    err = np.abs(deq[:, :cols] - w)
    bound = s[:, :cols] / 2 * (1 + 1e-5) + 1e-30
    if (err > bound).any():
        r, c = np.argwhere(err > bound)[0]
        fail(f"{what}: element [{r}, {c}] is {deq[r, c]} for {w[r, c]} (scale {s[r, c]}): off by more than scale/2")
    # The scale is max|w|/limit over the group (scale = 0 for a zero group).
    wp = np.zeros(q.shape, np.float32)
    wp[:, :cols] = w
    amax = np.abs(wp.reshape(rows, -1, g)).max(axis=2) if q.shape[1] % g == 0 else None
    if amax is not None and not np.allclose(scales, amax / limit, rtol=1e-6, atol=0):
        fail(f"{what}: scales are not max|w|/{limit} per group")


def align(v, a):
    return (v + a - 1) // a * a


def check_experts(dst, routed, fmt):
    path = os.path.join(dst, "experts.inkx")
    if not routed:
        if os.path.exists(path):
            fail("a dense-only model got an experts.inkx")
        return
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"INKLEXP1":
        return fail("experts.inkx: bad magic")
    (jlen,) = struct.unpack("<I", data[8:12])
    h = json.loads(data[16:16 + jlen])
    group = 32 if fmt == "int4" else 0
    for key, want in (("version", 1), ("format", fmt), ("group", group), ("layers", sorted(routed))):
        if h[key] != want:
            fail(f"experts.inkx: header {key} = {h[key]}, expected {want}")
    E, D, I = h["experts"], h["hidden"], h["inter"]
    records = len(h["layers"]) * E
    if len(data) != h["data_offset"] + records * h["record_bytes"]:
        fail(f"experts.inkx: {len(data)} bytes, the header describes {h['data_offset'] + records * h['record_bytes']}")
    table_at = align(16 + jlen, 8)
    crcs = struct.unpack(f"<{records}I", data[table_at:table_at + 4 * records])

    # The record layout, from docs/container.md.
    sections, at = [], 0
    for rows, cols in ((I, D), (I, D), (D, I)):
        padded = align(cols, 32)
        g = padded if group == 0 else group
        groups = -(-padded // g)
        data_at = align(at, 64)
        qbytes = rows * padded // (1 if fmt == "int8" else 2)
        scales_at = align(data_at + qbytes, 64)
        at = scales_at + rows * groups * 4
        sections.append((rows, cols, padded, groups, data_at, qbytes, scales_at))
    if h["record_bytes"] != align(at, 4096):
        fail(f"experts.inkx: record_bytes {h['record_bytes']}, the layout gives {align(at, 4096)}")
    for index in range(records):
        layer, e = h["layers"][index // E], index % E
        rec = data[h["data_offset"] + index * h["record_bytes"]:][:h["record_bytes"]]
        if zlib.crc32(rec) != crcs[index]:
            fail(f"experts.inkx: record {index} (layer {layer}, expert {e}) fails its CRC")
        for name, (rows, cols, padded, groups, data_at, qbytes, scales_at) in zip(("gate", "up", "down"), sections):
            q = unpack(fmt, rec[data_at:data_at + qbytes], rows, padded)
            scales = np.frombuffer(rec[scales_at:scales_at + rows * groups * 4], "<f4").reshape(rows, groups)
            check_quantized(f"experts.inkx layer {layer} expert {e} {name}", routed[layer][name][e], q, scales, group)


def check_dense(src_tensors, dst, dense, keep_audio):
    out = read_safetensors(os.path.join(dst, "model.safetensors"))
    names = set(out)
    for name, (dtype, a) in src_tensors.items():
        if name.startswith("model.audio_tower.") and not keep_audio:
            if name in names:
                fail(f"{name}: written without --keep-audio")
            continue
        if name not in names:
            fail(f"model.safetensors lacks {name}")
            continue
        odtype, shape, raw = out[name]
        quantized = dense != "keep" and name.endswith(QUANTIZABLE)
        if name == "lm_head.weight":
            a = a[:shape[0]]
        if quantized:
            want = "I8" if dense == "int8" else "U8"
            scales_name = name + ".scales"
            if odtype != want or scales_name not in out:
                fail(f"{name}: {odtype} without {scales_name}, expected {want} + scales")
                continue
            sd, sshape, sraw = out[scales_name]
            cols = a.shape[-1]
            padded = align(cols, 32)
            lead = list(a.shape[:-1])
            rows = int(np.prod(lead))
            if shape != lead + [padded if dense == "int8" else padded // 2] or sd != "F32":
                fail(f"{name}: shape {shape}, expected {lead} + padded columns")
                continue
            q = unpack("int8" if dense == "int8" else "int4", raw, rows, padded)
            scales = np.frombuffer(sraw, "<f4").reshape(rows, -1)
            check_quantized(name, a.reshape(rows, cols), q, scales, 0 if dense == "int8" else 64)
            names.discard(scales_name)
        elif name in KEPT or name.endswith(QUANTIZABLE):
            if odtype != dtype or list(shape) != list(a.shape) or not np.array_equal(to_f32(odtype, shape, raw), a):
                fail(f"{name}: {odtype} {shape}, expected {dtype} {list(a.shape)} with the source's values")
        else:
            if odtype != "F32" or int(np.prod(shape)) != a.size or not np.array_equal(
                    to_f32(odtype, shape, raw).reshape(-1), a.reshape(-1)):
                fail(f"{name}: {odtype} {shape}, expected F32 with the source's values")
            elif list(shape) != list(a.shape):
                fail(f"{name}: shape {shape}, the source's is {list(a.shape)}")
        names.discard(name)
    for name in sorted(names):  # absent learned scalars are written as 1
        if name.endswith("global_scale") and to_f32(*out[name]).reshape(-1).tolist() == [1.0]:
            continue
        fail(f"model.safetensors has {name}, which is not in the source")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--experts", default="int4")
    ap.add_argument("--dense", default="keep")
    ap.add_argument("--keep-audio", action="store_true")
    a = ap.parse_args()
    src_tensors, routed = source_in_transformers_names(a.src)
    with open(os.path.join(a.src, "config.json"), "rb") as f1, open(os.path.join(a.dst, "config.json"), "rb") as f2:
        if f1.read() != f2.read():
            fail("config.json differs from the source's")
    check_experts(a.dst, routed, a.experts)
    check_dense(src_tensors, a.dst, a.dense, a.keep_audio)
    report = json.load(open(os.path.join(a.dst, "convert-report.json")))
    if report["options"]["experts"] != a.experts or report["options"]["dense"] != a.dense:
        fail(f"convert-report.json options {report['options']}")
    kinds = set(report["quantization_error"])
    want = ({"experts.gate", "experts.up", "experts.down"} if routed else set())
    if a.dense != "keep":
        want |= {"attn.q", "attn.k", "attn.v", "attn.r", "attn.o", "lm_head"}
    if not want <= kinds:
        fail(f"convert-report.json: error kinds {sorted(kinds)} lack {sorted(want - kinds)}")
    leftovers = [n for n in os.listdir(a.dst) if n.endswith(".partial") or n.endswith(".state")]
    if leftovers:
        fail(f"left in DST: {leftovers}")
    for p in problems[:20]:
        print(p)
    if len(problems) > 20:
        print(f"... and {len(problems) - 20} more")
    if not problems:
        print("ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
