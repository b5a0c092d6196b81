#!/usr/bin/python3
"""Fetch only Inkling's audio tower into an audio.safetensors sidecar (docs/models.md).

  audio_sidecar.py SOURCE OUT_FILE

SOURCE is a checkpoint directory, or the URL of one, e.g.
https://huggingface.co/thinkingmachines/Inkling-Small/resolve/main (HF_TOKEN, if set, is
sent as a bearer token). The released checkpoints keep the two audio tensors
(model.audio.encoder.weight, model.audio.final_norm.weight; ~10 MB on Inkling-Small) inside
multi-GB shards, so there is no file to download alone: this reads
model.safetensors.index.json for their shard, that shard's header, and then exactly the
tensors' bytes (HTTP Range requests: a few MB instead of the shard). OUT_FILE holds the two
tensors as they are; the engine loads an audio.safetensors placed in a model directory,
e.g. one `inkling convert` wrote without --keep-audio (docs/convert.md).
"""

import json
import os
import struct
import sys
import urllib.error
import urllib.request

NAMES = ("model.audio.encoder.weight", "model.audio.final_norm.weight")   # as released


class Source:
    """Byte ranges of the checkpoint's files, local or over HTTP."""

    def __init__(self, base):
        self.base = base.rstrip("/")
        self.remote = base.startswith(("http://", "https://"))
        self.fetched = 0

    def read(self, name, start=None, end=None):
        """Bytes [start, end) of file `name` (the whole file without a range)."""
        if not self.remote:
            with open(os.path.join(self.base, name), "rb") as f:
                if start is None:
                    data = f.read()
                else:
                    f.seek(start)
                    data = f.read(end - start)
        else:
            req = urllib.request.Request(f"{self.base}/{name}")
            if os.environ.get("HF_TOKEN"):
                req.add_header("Authorization", "Bearer " + os.environ["HF_TOKEN"])
            if start is not None:
                req.add_header("Range", f"bytes={start}-{end - 1}")
            with urllib.request.urlopen(req) as r:
                if start is not None and r.status != 206:
                    raise SystemExit(f"{self.base}/{name}: the server ignored the byte range (status {r.status})")
                data = r.read()
        if start is not None and len(data) != end - start:
            raise SystemExit(f"{name}: asked for {end - start} bytes at {start}, got {len(data)}")
        self.fetched += len(data)
        return data


def shard_of(src):
    """{tensor: shard file} for the audio tensors."""
    try:
        index = json.loads(src.read("model.safetensors.index.json"))
        wmap = index["weight_map"]
    except (FileNotFoundError, urllib.error.HTTPError):
        wmap = {n: "model.safetensors" for n in NAMES}   # one unsharded file
    missing = [n for n in NAMES if n not in wmap]
    if missing:
        raise SystemExit(f"{src.base}: no {', '.join(missing)} in the checkpoint's weight map (not an Inkling "
                         "release with an audio tower?)")
    return {n: wmap[n] for n in NAMES}


def fetch(src):
    """[(name, header entry, bytes)] of the audio tensors."""
    out, headers = [], {}
    for name, shard in shard_of(src).items():
        if shard not in headers:
            n = struct.unpack("<Q", src.read(shard, 0, 8))[0]
            headers[shard] = (8 + n, json.loads(src.read(shard, 8, 8 + n)))
        base, header = headers[shard]
        if name not in header:
            raise SystemExit(f"{shard}: the index names {name}, its header does not")
        e = header[name]
        a, b = e["data_offsets"]
        out.append((name, {"dtype": e["dtype"], "shape": e["shape"]}, src.read(shard, base + a, base + b)))
    return out


def write(path, tensors):
    header, off = {}, 0
    for name, e, data in tensors:
        header[name] = dict(e, data_offsets=[off, off + len(data)])
        off += len(data)
    hj = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    hj += b" " * (-len(hj) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for _, _, data in tensors:
            f.write(data)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1])
    src = Source(argv[1])
    tensors = fetch(src)
    write(argv[2], tensors)
    what = ", ".join(f"{n} {e['dtype']} {e['shape']}" for n, e, _ in tensors)
    print(f"{argv[2]}: {what}; {src.fetched / 1e6:.1f} MB read from {src.base}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
