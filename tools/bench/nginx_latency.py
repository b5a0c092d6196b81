"""What nginx adds in front of a gateway (#17 item 2's goal: < 1 ms at p50): one gateway with
its engine on models/inkling-demo, and nginx running the sample configuration
docs/nginx-inkling.conf (tests/lib/nginx.py: a user-level process on loopback) in front of it.
The same requests go straight to the gateway and through nginx, alternating one by one so both
see the same machine load, each way on its own kept-alive connection: GET /health (the proxy
hop alone) and a one-token chat completion (a generation, x-session-id set as a client would).

    python3 tools/bench/nginx_latency.py BUILD [N]

Prints one JSON object (milliseconds: p50, p90, p99 per way, the added p50 and the median of
the pairs' differences) and a summary line per request kind on stderr.
"""
import http.client
import json
import os
import sys
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Gateway  # noqa: E402
from lib import nginx  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def timed(conn, method, path, body, headers):
    t0 = time.perf_counter()
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    r.read()
    dt = (time.perf_counter() - t0) * 1000
    if r.status != 200:
        raise RuntimeError(f"{method} {path}: {r.status}")
    return dt


def compare(direct, proxied, method, path, body, n):
    headers = {"Content-Type": "application/json", "x-session-id": "bench"}
    for _ in range(20):  # warm both ways (connections, the slot's prefix)
        timed(direct, method, path, body, headers)
        timed(proxied, method, path, body, headers)
    d, p = [], []
    for _ in range(n):
        d.append(timed(direct, method, path, body, headers))
        p.append(timed(proxied, method, path, body, headers))
    way = lambda xs: {"p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99)}  # noqa: E731
    # Also the median of each pair's difference: a pair shares the machine's load of the moment.
    return {"n": n, "direct_ms": way(d), "nginx_ms": way(p), "added_p50_ms": pct(p, 50) - pct(d, 50),
            "added_median_of_pairs_ms": pct([b - a for a, b in zip(d, p)], 50)}


def main():
    g = Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", os.path.join(ROOT, "models", "inkling-demo"),
                 "--slots", "2", "--ctx", "512", "--threads", "2", "--trusted-proxy", "127.0.0.1"])
    n = None
    try:
        n = nginx.Nginx(os.path.join(ROOT, "docs", "nginx-inkling.conf"), [g.port])
        direct = http.client.HTTPConnection("127.0.0.1", g.port, timeout=60)
        proxied = http.client.HTTPConnection("127.0.0.1", n.port, timeout=60)
        chat = json.dumps({"model": "inkling-demo", "max_tokens": 1, "temperature": 0,
                           "messages": [{"role": "user", "content": "Hello there, how are you?"}]})
        out = {"health": compare(direct, proxied, "GET", "/health", None, N),
               "chat_1_token": compare(direct, proxied, "POST", "/v1/chat/completions", chat, max(50, N // 5)),
               "nginx": nginx.version()}
        print(json.dumps(out, indent=1))
        for k in ("health", "chat_1_token"):
            r = out[k]
            print(f"nginx_latency {k}: p50 direct {r['direct_ms']['p50']:.3f} ms, through nginx "
                  f"{r['nginx_ms']['p50']:.3f} ms: nginx adds {r['added_p50_ms']:.3f} ms (median of pairs "
                  f"{r['added_median_of_pairs_ms']:.3f} ms, n={r['n']})", file=sys.stderr)
    finally:
        if n:
            n.stop()
        g.stop()


main()
