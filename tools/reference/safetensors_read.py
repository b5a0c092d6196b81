"""Minimal safetensors reader (no `safetensors` package needed).

File format: 8-byte little-endian header length N, then N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
then the data section; offsets are relative to the start of the data section.

Every check failure raises SafetensorsError naming the file and the tensor.
"""

import json
import mmap
import os
import struct

import numpy as np


class SafetensorsError(Exception):
    pass


# dtype name -> (numpy dtype of the stored element, bytes per element)
_DTYPES = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),  # widened to f32 by hand below
    "I64": (np.dtype("<i8"), 8),
    "I32": (np.dtype("<i4"), 4),
    "U8": (np.dtype("u1"), 1),
}


def bf16_bits_to_f32(u16):
    """bf16 is the high half of an IEEE f32: widen by shifting into the top bits."""
    return (u16.astype(np.uint32) << np.uint32(16)).view(np.float32)


class SafetensorsFile:
    """One .safetensors file, memory-mapped; tensors are decoded on request."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        if size < 8:
            raise SafetensorsError(f"{path}: {size} bytes, too short for a safetensors header")
        with open(path, "rb") as f:
            (hlen,) = struct.unpack("<Q", f.read(8))
            if hlen > size - 8:
                raise SafetensorsError(
                    f"{path}: header length {hlen} runs past the end of the file ({size} bytes)")
            raw = f.read(hlen)
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SafetensorsError(f"{path}: header is not valid JSON: {e}") from None
        if not isinstance(header, dict):
            raise SafetensorsError(f"{path}: header is not a JSON object")
        self.metadata = header.pop("__metadata__", None) or {}
        self.data_start = 8 + hlen
        data_len = size - self.data_start
        self.entries = {}
        for name, e in header.items():
            if not isinstance(e, dict):
                raise SafetensorsError(f"{path}: tensor {name}: entry is not an object")
            dt = e.get("dtype")
            if dt not in _DTYPES:
                raise SafetensorsError(f"{path}: tensor {name}: unsupported dtype {dt!r} "
                                       f"(expected one of {', '.join(sorted(_DTYPES))})")
            shape = e.get("shape")
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise SafetensorsError(f"{path}: tensor {name}: bad shape {shape!r}")
            offs = e.get("data_offsets")
            if (not isinstance(offs, list) or len(offs) != 2
                    or not all(isinstance(o, int) for o in offs)):
                raise SafetensorsError(f"{path}: tensor {name}: bad data_offsets {offs!r}")
            b, en = offs
            numel = 1
            for d in shape:
                numel *= d
            need = numel * _DTYPES[dt][1]
            if not (0 <= b <= en <= data_len):
                raise SafetensorsError(
                    f"{path}: tensor {name}: data_offsets [{b}, {en}] outside the data section "
                    f"({data_len} bytes; file truncated?)")
            if en - b != need:
                raise SafetensorsError(
                    f"{path}: tensor {name}: {en - b} bytes for {dt} {shape}, expected {need}")
            self.entries[name] = (dt, tuple(shape), b, en)
        self._mm = None

    def _map(self):
        if self._mm is None:
            with open(self.path, "rb") as f:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mm

    def dtype_of(self, name):
        return self.entries[name][0]

    def shape_of(self, name):
        return self.entries[name][1]

    def read(self, name):
        """The tensor as a numpy array: floats widened to float32 (F64 stays float64)."""
        dt, shape, b, en = self.entries[name]
        npdt, _ = _DTYPES[dt]
        buf = self._map()[self.data_start + b:self.data_start + en]
        arr = np.frombuffer(buf, dtype=npdt).reshape(shape)
        if dt == "BF16":
            return bf16_bits_to_f32(arr)
        if dt in ("F16", "F32"):
            return arr.astype(np.float32)
        return arr.copy()


class TensorSet:
    """Tensors from several files, each name held by exactly one file."""

    def __init__(self):
        self.where = {}   # name -> SafetensorsFile
        self.files = []

    def add_file(self, path):
        sf = SafetensorsFile(path)
        self.files.append(sf)
        for name in sf.entries:
            if name in self.where:
                raise SafetensorsError(
                    f"tensor {name} is in both {self.where[name].path} and {path}")
            self.where[name] = sf

    def __contains__(self, name):
        return name in self.where

    def names(self):
        return self.where.keys()

    def shape(self, name):
        return self.where[name].shape_of(name)

    def dtype(self, name):
        return self.where[name].dtype_of(name)

    def read(self, name):
        return self.where[name].read(name)


def open_model_dir(model_dir):
    """Index the weight files of a model directory.

    model.safetensors.index.json (sharded) wins; else model.safetensors; else every
    *.safetensors file in the directory. An audio.safetensors sidecar is always added.
    """
    ts = TensorSet()
    index = os.path.join(model_dir, "model.safetensors.index.json")
    single = os.path.join(model_dir, "model.safetensors")
    sidecar = os.path.join(model_dir, "audio.safetensors")
    if os.path.exists(index):
        try:
            with open(index) as f:
                idx = json.load(f)
            wmap = idx["weight_map"]
            if not isinstance(wmap, dict):
                raise TypeError("weight_map is not an object")
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise SafetensorsError(f"{index}: not a valid safetensors index: {e}") from None
        shards = sorted(set(wmap.values()))
        for s in shards:
            p = os.path.join(model_dir, s)
            if os.path.basename(s) != s or not os.path.exists(p):
                raise SafetensorsError(f"{index}: shard {s!r} not found in {model_dir}")
            ts.add_file(p)
        for name, s in wmap.items():
            if name not in ts or os.path.basename(ts.where[name].path) != s:
                raise SafetensorsError(f"{index}: tensor {name} is not in shard {s}")
    elif os.path.exists(single):
        ts.add_file(single)
    else:
        found = sorted(p for p in os.listdir(model_dir)
                       if p.endswith(".safetensors") and p != "audio.safetensors")
        if not found:
            raise SafetensorsError(f"{model_dir}: no *.safetensors weight files")
        for p in found:
            ts.add_file(os.path.join(model_dir, p))
    if os.path.exists(sidecar) and not any(f.path == sidecar for f in ts.files):
        ts.add_file(sidecar)
    return ts
