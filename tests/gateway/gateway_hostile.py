"""Black-box tests of build/inkling-gateway against hostile clients (issue 20): cross-site
requests, bodies that cost more than their size, audio bombs. One gateway on the demo model
serves most checks.

    python3 tests/gateway/gateway_hostile.py BUILD

Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only.
"""
import base64
import json
import os
import socket
import struct
import sys
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(BUILD, "demo-model")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway, read_all  # noqa: E402

checks = Checks("gateway hostile")
report = checks.report

CHAT = json.dumps({"model": "demo-model", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})


def error_of(body):
    """The OpenAI error object's fields, or None when the body is not one."""
    try:
        e = json.loads(body)["error"]
        return e if set(e) == {"message", "type", "param", "code"} else None
    except (ValueError, KeyError, TypeError):
        return None


def start(*extra):
    return Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--slots", "1", "--ctx", "512",
                    "--threads", "2"] + list(extra))


def cross_site(g):
    """Item 1: a page on another origin must not drive the model; curl and SDKs (no Origin)
    may send any Content-Type."""
    own = f"http://127.0.0.1:{g.port}"
    plain = {"Content-Type": "text/plain"}
    st, body, headers = g.request("POST", "/v1/chat/completions", CHAT,
                                  headers={**plain, "Origin": "https://evil.example"})
    e = error_of(body)
    report("a text/plain POST from a foreign Origin is 403 with an OpenAI error object",
           st == 403 and e and e["code"] == "origin_not_allowed" and "evil.example" in e["message"]
           and "Access-Control-Allow-Origin" not in headers, (st, body[:200]))
    st, body, _ = g.request("POST", "/v1/completions", json.dumps({"model": "demo-model", "prompt": "a", "max_tokens": 1}),
                            headers={"Origin": "null"})
    report("the opaque Origin 'null' (sandboxed frames, file://) is refused on /v1/completions too", st == 403,
           (st, body[:200]))
    st, body, _ = g.request("POST", "/v1/nothing-here", "{}", headers={"Origin": "https://evil.example"})
    report("a foreign Origin is refused before routing (any acting method, any path)", st == 403, (st, body[:200]))
    st, body, headers = g.request("POST", "/v1/chat/completions", CHAT, headers={**plain, "Origin": own})
    report("the gateway's own origin (the web UI) may POST", st == 200 and headers.get("Access-Control-Allow-Origin") == own,
           (st, body[:200]))
    st, body, _ = g.request("POST", "/v1/chat/completions", CHAT,
                            headers={"Origin": f"http://LOCALHOST:{g.port}", "Host": f"localhost:{g.port}"})
    report("same origin as the Host header, compared case-insensitively", st == 200, (st, body[:200]))
    st, body, _ = g.request("POST", "/v1/chat/completions", CHAT,
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    report("without Origin a form-encoded body (curl -d) is read as JSON", st == 200, (st, body[:200]))
    st, body, _ = g.request("POST", "/v1/chat/completions", CHAT, headers={"Content-Type": "text/plain"})
    report("without Origin a text/plain body is read as JSON", st == 200, (st, body[:200]))
    st, _, _ = g.request("GET", "/v1/models", headers={"Origin": "https://evil.example"})
    report("GET does not act and is answered (the browser withholds it: no Allow-Origin)", st == 200, st)


def wav_u8(rate, frames):
    """A mono 8-bit PCM WAV of silence: `frames` bytes of data at `rate` Hz."""
    data = b"\x80" * frames
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def audio_chat(*clips):
    parts = [{"type": "text", "text": "what is said?"}]
    parts += [{"type": "input_audio", "input_audio": {"data": base64.b64encode(c).decode(), "format": "wav"}}
              for c in clips]
    return json.dumps({"model": "demo-model", "max_tokens": 1, "messages": [{"role": "user", "content": parts}]})


def peak_rss_mb(pid):
    """The process's peak resident set (VmHWM) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0


def audio_bombs(g):
    """Item 2: a clip's duration is checked from its header, before decoding or resampling."""
    before = peak_rss_mb(g.proc.pid)
    t0 = time.monotonic()
    # The bomb: 2 MB at 63 Hz is 8.8 hours, 2 GB of floats once resampled to 16 kHz.
    st, body, _ = g.request("POST", "/v1/chat/completions", audio_chat(wav_u8(63, 2_000_000)))
    elapsed = time.monotonic() - t0
    grew = peak_rss_mb(g.proc.pid) - before
    e = error_of(body)
    report("a 2 MB WAV at 63 Hz (8.8 h) is 400 invalid_audio naming its length and the limit",
           st == 400 and e and e["code"] == "invalid_audio" and "31746.0 s" in e["message"]
           and "600 s" in e["message"], (st, body[:300]))
    report(f"... and costs the gateway no resampling: peak RSS grew {grew:.0f} MiB (< 64), {elapsed:.1f} s",
           grew < 64, (before, grew))
    # The limit is per request: two clips of 400 s are 800 s. The first (16 kHz, nothing to
    # resample) is read; the second is refused from its header.
    st, body, _ = g.request("POST", "/v1/chat/completions", audio_chat(wav_u8(16000, 6_400_000), wav_u8(63, 25_200)))
    e = error_of(body)
    report("a request's clips share the 600 s limit (the second of two 400 s clips is refused)",
           st == 400 and e and "content[2]" in e["message"] and "200.0 s left" in e["message"], (st, body[:300]))


def costly_json(g):
    """Item 13: JSON nesting and value count are bounded before the parser runs."""
    before = peak_rss_mb(g.proc.pid)
    st, body, _ = g.request("POST", "/v1/chat/completions", "[" * ((32 << 20) - 16))
    e = error_of(body)
    grew = peak_rss_mb(g.proc.pid) - before
    report("32 MiB of '[' is 400 'deeper than 64 levels'", st == 400 and e and "deeper than 64 levels" in e["message"],
           (st, body[:200]))
    before = peak_rss_mb(g.proc.pid)
    st, body, _ = g.request("POST", "/v1/chat/completions", "[" + ",".join(["{}"] * 10_000_000) + "]")
    e = error_of(body)
    grew2 = peak_rss_mb(g.proc.pid) - before
    report("10 million empty objects are 400 'more than 262144 JSON values'",
           st == 400 and e and "more than 262144 JSON values" in e["message"], (st, body[:200]))
    report(f"... and neither builds a DOM: peak RSS grew {grew:.0f} and {grew2:.0f} MiB for 32 MiB bodies (< 48)",
           grew < 48 and grew2 < 48, (grew, grew2))
    st, body, _ = g.request("POST", "/v1/chat/completions", json.dumps(
        {"model": "demo-model", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
         "user": "[" * 1000 + "{" * 1000}))
    report("brackets inside strings are not nesting", st == 200, (st, body[:200]))


def small_ones(g):
    """Item 17: HEAD has no body; cache_slot is checked in its own width."""
    s = socket.create_connection(("127.0.0.1", g.port), timeout=10)
    s.sendall(b"HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    answer = read_all(s, timeout=10)
    s.close()
    head, _, rest = answer.partition(b"\r\n\r\n")
    report("HEAD /health sends the headers (Content-Length too) and no body",
           head.startswith(b"HTTP/1.1 200") and b"Content-Length: " in head and rest == b"", answer[:300])
    # Item 12: the rendered prompt must fit the engine's 16 MiB, whatever the body cap.
    big = json.dumps({"model": "demo-model", "max_tokens": 1, "messages": [{"role": "user", "content": "z" * (17 << 20)}]})
    st, resp, _ = g.request("POST", "/v1/chat/completions", big)
    e = error_of(resp)
    report("a prompt over the engine's 16 MiB is a 400 from the gateway naming the limit",
           st == 400 and e and e["param"] == "messages" and "at most 16777216" in e["message"], (st, resp[:300]))
    body = json.loads(CHAT)
    body["cache_slot"] = 2 ** 32
    st, resp, _ = g.request("POST", "/v1/chat/completions", json.dumps(body))
    e = error_of(resp)
    report("cache_slot 2^32 is a 400 naming cache_slot, not slot 0", st == 400 and e and e["param"] == "cache_slot",
           (st, resp[:200]))


def main():
    g = start()
    try:
        # Peak RSS only grows: the cheap checks first, each bound well below what it guards
        # against (gigabytes before the fixes).
        cross_site(g)
        costly_json(g)
        audio_bombs(g)
        small_ones(g)
    finally:
        g.stop()
    g = start("--cors-origin", "https://app.example")
    try:
        st, body, headers = g.request("POST", "/v1/chat/completions", CHAT, headers={"Origin": "https://app.example"})
        st2, _, _ = g.request("POST", "/v1/chat/completions", CHAT, headers={"Origin": "https://app.example.evil"})
        report("--cors-origin allows exactly that origin", st == 200 and st2 == 403
               and headers.get("Access-Control-Allow-Origin") == "https://app.example", (st, st2, body[:200]))
    finally:
        g.stop()
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
