#!/usr/bin/env python3
"""Draining after a device loss (docs/gateway.md "The engine's life"), black-box: the real
gateway and engine, the loss faked by the engine's --fault-device-lost-after.

- Under continuous load (more clients than slots, each sending its next request as soon as
  the last one ends, so some request is always in flight) the gateway still restarts the
  engine: it admits nothing new while the engine drains, the requests in flight finish, the
  engine restarts, the waiting requests go on. Every request ends 200.
- A request that never finishes (--fault-hold-after) cannot hold the drain forever: at
  --engine-drain-deadline the engine is killed, that stream ends with an SSE error event and
  [DONE], the engine restarts and serves.

Usage: drain_e2e.py BUILD_DIR. Prints PASS/FAIL lines.
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway, read_all  # noqa: E402
from lib.scrape import prometheus, sse_events  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
MODEL = os.path.join(BUILD, "demo-model")
checks = Checks("gateway drain")


def start(*extra):
    return Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--slots", "2", "--ctx", "512",
                    "--threads", "2", *extra])


def chat(g, content, max_tokens=8, timeout=120):
    body = {"model": "demo-model", "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}
    status, data, _ = g.request("POST", "/v1/chat/completions", body, timeout=timeout)
    return status, data


def metric(g, name):
    return prometheus(g.request("GET", "/metrics")[1].decode()).get((name, ()), 0)


def continuous_load():
    # Every third finished request reports a lost device: several drains under load.
    g = start("--engine-arg=--fault-device-lost-after=3", "--max-queue", "16")
    results, stop = [], threading.Event()
    lock = threading.Lock()

    def client(k):
        n = 0
        while not stop.is_set():
            st, body = chat(g, f"client {k} turn {n}")
            with lock:
                results.append((st, body[:200]))
            n += 1

    try:
        threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(5)]
        for t in threads:
            t.start()
        deadline = time.time() + 120
        while time.time() < deadline and metric(g, "inkling_engine_restarts_total") < 3:
            time.sleep(0.2)
        restarts = metric(g, "inkling_engine_restarts_total")
        losses = metric(g, "inkling_device_losses_total")
        stop.set()
        for t in threads:
            t.join(150)
        log = open(g.log_path, errors="replace").read()
        bad = [r for r in results if r[0] != 200]
        checks.report("under continuous load (5 clients, 2 slots) a lost device still gets the engine restarted, "
                      "three times", restarts >= 3 and losses >= 3, (restarts, losses, len(results), log[-1500:]))
        checks.report("... each time by draining: nothing new admitted, the requests in flight finished first",
                      log.count("ready -> draining") >= 3 and log.count("drained: ending its input") >= 3
                      and "the drain deadline passed" not in log, log[-1500:])
        checks.report("... and every request of every client ended 200", results and not bad,
                      (len(results), bad[:3]))
        # The third restart may still be loading its engine when the clients stop: healthy
        # again within the start-up bound, not at this very moment.
        try:
            g.wait_ready(120)
            healthy = True
        except RuntimeError as e:
            healthy = str(e)
        checks.report("... the gateway is healthy afterwards (within 120 s)", healthy is True, healthy)
    finally:
        stop.set()
        g.stop()


def drain_deadline():
    # The first request finishes (2 tokens) and the engine then reports a lost device; the
    # other one is held after 2 tokens for good, so only the deadline can end the drain.
    g = start("--engine-arg=--fault-device-lost-after=1", "--engine-arg=--fault-hold-after=2",
              "--engine-drain-deadline", "2")
    try:
        body = json.dumps({"model": "demo-model", "max_tokens": 200, "stream": True,
                           "messages": [{"role": "user", "content": "a long answer"}]})
        s = socket.create_connection(("127.0.0.1", g.port))
        s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        # The held stream has started (its first tokens came) before the loss is triggered.
        s.settimeout(60)
        head = b""
        while b'"content"' not in head:
            chunk = s.recv(65536)
            if not chunk:
                break
            head += chunk
        st, _ = chat(g, "short", max_tokens=2)
        rest = read_all(s, timeout=60)
        s.close()
        events = sse_events(head + rest)
        errors = [e for e in events if isinstance(e, dict) and "error" in e]
        log = open(g.log_path, errors="replace").read()
        checks.report("a request held past --engine-drain-deadline 2: the engine is killed and the stream ends with "
                      "an SSE error event and [DONE]",
                      st == 200 and errors and events[-1] == "[DONE]" and "the drain deadline passed" in log,
                      (st, events[-3:], log[-1200:]))
        deadline = time.time() + 60
        while time.time() < deadline and g.request("GET", "/health")[0] != 200:
            time.sleep(0.1)
        pid_after = json.loads(g.request("GET", "/v1/stats")[1])["engine"]["pid"]
        st2, _ = chat(g, "after", max_tokens=2)
        checks.report("... then the restarted engine serves", st2 == 200 and pid_after != 0 and
                      metric(g, "inkling_engine_restarts_total") >= 1, (st2, pid_after))
    finally:
        g.stop()


continuous_load()
drain_deadline()
sys.exit(checks.finish())
