"""A safetensors file as raw bytes per tensor, for suites that compare files byte for byte
(written from the format, independent of the tools that write them)."""
import json
import struct


def tensors_of(path):
    """{name: (dtype, shape, bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}
