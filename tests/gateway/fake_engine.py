#!/usr/bin/env python3
"""A scriptable stand-in for `inkling serve`, for gateway tests of what a real engine rarely
does: malformed telemetry, stderr before dying, dying at a chosen moment. Started by the
gateway as its engine (`--engine tests/gateway/fake_engine.py --engine-arg=--fake-…`); the
gateway's own engine arguments (serve, --model …) are ignored.

It speaks the wire (protocol/PROTOCOL.md): READY, an info STATS, then for each SUBMIT an
ACCEPT, one DATA "ok" (or the --fake-reply tokens) and a DONE; CANCEL → ERROR CANCELLED;
STATS → a STATS frame.

  --fake-bad-json         after READY: STATS and EVENT frames whose JSON fields have the
                          wrong types ({"kind": 7}, "hit_pct": "x", …)
  --fake-stderr TEXT      write TEXT (\\n-separated lines) to stderr after READY
  --fake-stderr-flood N   first write N lines of 100 000 bytes each to stderr
  --fake-exit-after-ready CODE
                          exit with CODE right after READY (and --fake-stderr)
  --fake-hold             answer a SUBMIT with ACCEPT and one DATA, then nothing until CANCEL;
                          SIGUSR1 finishes every held request (the rest of its reply, DONE)
  --fake-reply FILE       FILE holds a JSON array of strings: the DATA payloads (one token
                          each) every SUBMIT is answered with, instead of the one "ok" (a
                          file: the gateway's --engine-arg splits its value at commas)
  --fake-record FILE      append one JSON line per SUBMIT to FILE before answering it: id,
                          slot, max_tokens, temperature, top_p, keys, prompt (text), ext
                          (the extension bytes, base64)
  --fake-exit-after-accept CODE
                          exit with CODE after a SUBMIT's ACCEPT and its first DATA
  --fake-flood            answer a SUBMIT with ACCEPT, then 1000-byte DATA frames every
                          millisecond until CANCEL (a client that never reads fills up)
  --fake-refuse CODE      answer every SUBMIT with ERROR <id> CODE instead of running it
  --fake-silent           answer a SUBMIT with nothing at all (no ACCEPT, no ERROR): an engine
                          that is alive (STATS and CANCEL are answered) but never takes it
  --fake-log-control      write "fake: CANCEL <id>" / "fake: STOP <id>" to stderr for each
                          control frame received (the gateway logs the engine's stderr)
  --fake-hang-before-ready
                          never send READY: wait until killed (a load that hangs)
  --fake-linger           at EOF on stdin, stay alive until killed (as an engine finishing
                          a long request would)
  --fake-die-on TEXT      a SUBMIT whose prompt contains TEXT kills the engine (SIGSEGV) before
                          its ACCEPT: a poison request
  --fake-stats FILE       FILE holds the JSON object every STATS is answered with (and one sent
                          after READY) instead of {"kind":"stats","active":0}: an older engine's
                          figures, say

The info STATS carries "fds": the descriptors it inherited, each with what it points at.
"""
import base64
import json
import os
import signal
import sys
import threading

READY = b"\x01\x01READY\x01\x01\n"


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


out = sys.stdout.buffer
inp = sys.stdin.buffer


# The main loop and the SIGUSR1 releaser thread both write frames.
out_lock = threading.Lock()


def send(data):
    with out_lock:
        out.write(data)
        out.flush()


def payload_frame(kind, body):
    data = body.encode() if isinstance(body, str) else body
    send(f"{kind} {len(data)}\n".encode() + data + b"\n")


def inherited_fds():
    """{fd: target} for every open descriptor but the one listing them."""
    fds = {}
    with os.scandir("/proc/self/fd") as it:
        for e in it:
            try:
                fds[int(e.name)] = os.readlink(e.path)
            except OSError:
                pass
    return {fd: t for fd, t in fds.items() if not t.endswith("/fd")}


def flood(rid):
    """DATA frames until a CANCEL for `rid` arrives on stdin."""
    import select
    piece = b"z" * 1000
    while True:
        send(f"DATA {rid} {len(piece)}\n".encode() + piece + b"\n")
        ready, _, _ = select.select([inp], [], [], 0.001)
        if ready:
            line = inp.readline()
            if not line or line.split()[:2] == [b"CANCEL", rid.encode()]:
                send(f"ERROR {rid} CANCELLED\n".encode())
                return


def reply_tokens():
    if arg("--fake-reply") is None:
        return ["ok"]
    with open(arg("--fake-reply")) as f:
        return json.load(f)


REPLY = reply_tokens()


def data(rid, token):
    piece = token.encode()
    send(f"DATA {rid} {len(piece)}\n".encode() + piece + b"\n")


def done(rid):
    send(f"DONE {rid} STAT {len(REPLY)} 1.000 100.0 0.001 1 0\n".encode())


def record(path, f, prompt, ext):
    """One SUBMIT as a JSON line (written before it is answered, so a client that has its
    answer finds the line)."""
    keys = dict(k.decode().split("=", 1) for k in f[7:] if b"=" in k)
    line = {"id": f[1].decode(), "slot": int(f[2]), "max_tokens": int(f[4]), "temperature": float(f[5]),
            "top_p": float(f[6]), "keys": keys, "prompt": prompt.decode(errors="replace"),
            "ext": base64.b64encode(ext).decode()}
    with open(path, "a") as log:
        log.write(json.dumps(line) + "\n")


held = {}  # --fake-hold: request id → the reply tokens still to send
held_lock = threading.Lock()


def releaser():
    """SIGUSR1 (--fake-hold): every held request gets the rest of its reply and a DONE. The
    signal is blocked in every thread and taken here by sigwait, never by a Python handler: a
    handler that takes a lock deadlocks when a second signal of a storm (the tests send one
    every 0.2 s) lands inside the first one's critical section (seen under CPU starvation:
    the engine stopped answering STATS and the gateway killed it as unresponsive)."""
    while True:
        signal.sigwait({signal.SIGUSR1})
        with held_lock:
            ready = list(held.items())
            held.clear()
        for rid, rest in ready:
            for token in rest:
                data(rid, token)
            done(rid)


def main():
    fds = inherited_fds()
    if "--fake-hold" in sys.argv:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # before the thread: it inherits the mask
        threading.Thread(target=releaser, daemon=True).start()
    if "--fake-hang-before-ready" in sys.argv:
        signal.pause()
    send(READY)
    payload_frame("STATS", json.dumps({"kind": "info", "model": "fake", "slots": 4, "vocab": 100, "tokenizer": True,
                                       "fds": {str(k): v for k, v in sorted(fds.items())}}))
    stats = json.dumps({"kind": "stats", "active": 0})
    if arg("--fake-stats") is not None:
        with open(arg("--fake-stats"), encoding="utf-8") as f:
            stats = json.dumps(json.load(f))
        payload_frame("STATS", stats)
    if "--fake-bad-json" in sys.argv:
        payload_frame("STATS", json.dumps({"kind": "stats", "rss_gb": "lots", "expert_cache": {"hit_pct": "x"},
                                           "device": {"memory_used": [1], "memory_budget": None}}))
        payload_frame("STATS", json.dumps({"kind": 7}))
        payload_frame("EVENT", json.dumps({"kind": ["device_lost"]}))
        payload_frame("EVENT", "[1, 2]")
        payload_frame("STATS", "not json at all")
    if arg("--fake-stderr-flood") is not None:
        for _ in range(int(arg("--fake-stderr-flood"))):
            sys.stderr.write("x" * 100_000 + "\n")
    if arg("--fake-stderr") is not None:
        sys.stderr.write(arg("--fake-stderr").replace("\\n", "\n") + "\n")
        sys.stderr.flush()
    if arg("--fake-exit-after-ready") is not None:
        os._exit(int(arg("--fake-exit-after-ready")))
    while True:
        line = inp.readline()
        if not line:
            if "--fake-linger" in sys.argv:
                signal.pause()
            return 0
        f = line.split()
        if not f:
            continue
        if f[0] == b"SUBMIT":
            rid, nbytes = f[1].decode(), int(f[3])
            xbytes = int(f[7]) if len(f) > 7 and b"=" not in f[7] else 0
            body = inp.read(nbytes + xbytes + 1)
            if arg("--fake-record") is not None:
                record(arg("--fake-record"), f, body[:nbytes], body[nbytes:nbytes + xbytes])
            if arg("--fake-die-on") is not None and arg("--fake-die-on").encode() in body[:nbytes]:
                os.kill(os.getpid(), signal.SIGSEGV)
            if "--fake-silent" in sys.argv:
                continue
            if arg("--fake-refuse"):
                send(f"ERROR {rid} {arg('--fake-refuse')} refused by --fake-refuse\n".encode())
                continue
            send(f"ACCEPT {rid} 1 reused=0\n".encode())
            data(rid, REPLY[0])
            if arg("--fake-exit-after-accept") is not None:
                os._exit(int(arg("--fake-exit-after-accept")))
            if "--fake-hold" in sys.argv:
                with held_lock:
                    held[rid] = REPLY[1:]
                continue
            if "--fake-flood" in sys.argv:
                flood(rid)
                continue
            for token in REPLY[1:]:
                data(rid, token)
            done(rid)
            continue
        if f[0] in (b"CANCEL", b"STOP") and "--fake-log-control" in sys.argv:
            sys.stderr.write(f"fake: {f[0].decode()} {f[1].decode()}\n")
            sys.stderr.flush()
        if f[0] == b"CANCEL":
            with held_lock:
                held.pop(f[1].decode(), None)
            send(f"ERROR {f[1].decode()} CANCELLED\n".encode())
        elif f[0] == b"STATS":
            payload_frame("STATS", stats)


if __name__ == "__main__":
    sys.exit(main())
