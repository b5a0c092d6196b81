#!/usr/bin/python3
"""tools/audio-sidecar: only the audio tower, from a checkpoint directory or over HTTP.

  audio_sidecar_test.py BUILD_DIR

On the audio fixture in the release layout (its audio tensors inside a weight shard):
- from the directory and from a loopback HTTP server that honours Range, the sidecar holds
  the source's two tensors byte for byte; over HTTP every read of the shard is a Range
  request, for its header and those tensors' bytes and nothing else;
- `inkling convert` without --keep-audio drops the tower (an audio request then fails);
  with the sidecar dropped in, the converted model answers the fixture's audio prompt with
  the tokens and logits of a --keep-audio conversion.
"""

import http.server
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "audio-sidecar", "audio_sidecar.py")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib.safetensors_bytes import tensors_of as tensors  # noqa: E402

failures = 0


def report(name, ok, detail=""):
    global failures
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
    failures += 0 if ok else 1


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """GET of a file under `root`, whole or one `bytes=a-b` range (206); logs each request."""

    root, log = None, []

    def do_GET(self):
        path = os.path.join(self.root, self.path.lstrip("/"))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        rng = self.headers.get("Range")
        status = 200
        if rng:
            a, b = rng.removeprefix("bytes=").split("-")
            data, status = data[int(a):int(b) + 1], 206
        self.log.append((self.path, rng, len(data)))
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def run_audio(build, model, info):
    prompt = ",".join(map(str, info["suggested_prompt"]))
    r = subprocess.run([os.path.join(build, "inkling"), "run", "--model", model, "--ids", prompt, "--audio",
                        info["dmel"], "-n", "6", "--json"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1]
    j = json.loads(r.stdout)
    return (j["tokens"], j["last_logits"]), ""


def main(build):
    subprocess.run([os.path.join(ROOT, "tools", "make-tiny", "ensure.sh"), os.path.join(build, "fixtures")],
                   check=True)
    src = os.path.join(build, "fixtures", "audio-release-bf16")
    info = json.load(open(os.path.join(src, "make_tiny.json")))
    info["dmel"] = os.path.join(src, info["sample_dmel"])
    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))["weight_map"]
    shard = index["model.audio.encoder.weight"]
    want = {k: v for k, v in tensors(os.path.join(src, shard)).items() if k.startswith("model.audio.")}
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, "local.safetensors")
        subprocess.run([sys.executable, TOOL, src, local], check=True, capture_output=True, timeout=120)
        report(f"from the directory: the two audio tensors, bytes as in {shard}",
               tensors(local) == want and len(want) == 2, str(sorted(tensors(local))))

        RangeHandler.root = src
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            remote = os.path.join(tmp, "remote.safetensors")
            url = f"http://127.0.0.1:{server.server_address[1]}/"
            r = subprocess.run([sys.executable, TOOL, url, remote], capture_output=True, text=True, timeout=120)
            report("over HTTP: the same bytes", r.returncode == 0 and tensors(remote) == want, r.stderr[-300:])
        finally:
            server.shutdown()
        shard_reads = [x for x in RangeHandler.log if x[0] == "/" + shard]
        size = os.path.getsize(os.path.join(src, shard))
        with open(os.path.join(src, shard), "rb") as f:
            header_bytes = 8 + struct.unpack("<Q", f.read(8))[0]
        exact = header_bytes + sum(len(v[2]) for v in want.values())
        got = sum(x[2] for x in shard_reads)
        report(f"over HTTP: only Range reads of the shard, its header and the two tensors ({got} of its {size} bytes)",
               shard_reads and all(x[1] for x in shard_reads) and got == exact, f"{RangeHandler.log}, want {exact}")

        inkling = os.path.join(build, "inkling")
        kept, dropped = os.path.join(tmp, "kept"), os.path.join(tmp, "dropped")
        subprocess.run([inkling, "convert", src, kept, "--keep-audio"], check=True, capture_output=True, timeout=300)
        subprocess.run([inkling, "convert", src, dropped], check=True, capture_output=True, timeout=300)
        want_out, err = run_audio(build, kept, info)
        report("a --keep-audio conversion answers the audio prompt", want_out is not None, err)
        out, err = run_audio(build, dropped, info)
        report("without --keep-audio the conversion has no audio tower", out is None and "audio" in err, err)
        os.replace(local, os.path.join(dropped, "audio.safetensors"))
        out, err = run_audio(build, dropped, info)
        report("with the sidecar: the --keep-audio conversion's tokens and logits", out is not None and out == want_out,
               err or f"{out and out[0]} vs {want_out and want_out[0]}")
    print(f"{'FAIL' if failures else 'OK'}: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build"))
