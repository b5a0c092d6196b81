"""Gateway overhead, measured in one run: the same one-token request sent to the engine
directly over its pipes and through inkling-gateway over HTTP; the difference at p50 and
p99 is what the gateway adds. Also time to first token both ways, and /health requests/s.

    python3 tools/bench/gateway_bench.py BUILD [MODEL_DIR] [N]
"""
import http.client
import json
import os
import socket
import statistics
import sys
import threading
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
MODEL = sys.argv[2] if len(sys.argv) > 2 else os.path.join(BUILD, "demo-model")
N = int(sys.argv[3]) if len(sys.argv) > 3 else 200
PROMPT = "Hello there, how are you?"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Engine, Gateway, read_until  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def direct():
    eng = Engine([os.path.join(BUILD, "inkling"), "serve", "--model", MODEL, "--slots", "1", "--ctx", "512",
                  "--threads", "2"])
    total, ttft = [], []
    body = PROMPT.encode()
    for i in range(N + 10):
        t0 = time.perf_counter()
        eng.submit(f"d{i}", 0, body, 1, reset=1)
        first = None
        while True:
            k = eng.frame().kind
            if k == "DATA" and first is None:
                first = time.perf_counter() - t0
            if k in ("DONE", "ERROR"):
                break
        if i >= 10:  # warm-up excluded
            total.append(time.perf_counter() - t0)
            ttft.append(first if first is not None else total[-1])
    eng.close()
    return total, ttft


def via_gateway():
    gw = Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--slots", "1", "--ctx", "512",
                  "--threads", "2", "--max-queue", "64"])
    port = gw.port
    try:
        model = os.path.basename(os.path.abspath(MODEL))
        total, ttft = [], []
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for i in range(N + 10):
            body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 1, "temperature": 0,
                               "cache_slot": 0, "user": str(i)})
            t0 = time.perf_counter()
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if i >= 10:
                total.append(time.perf_counter() - t0)
            # Streaming, for time to first token.
            s = socket.create_connection(("127.0.0.1", port))
            sb = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 1, "temperature": 0, "stream": True,
                             "cache_slot": 0})
            t0 = time.perf_counter()
            s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(sb)}\r\n\r\n{sb}".encode())
            read_until(s, b'"text"')
            if i >= 10:
                ttft.append(time.perf_counter() - t0)
            while s.recv(65536):
                pass
            s.close()
        # /health requests per second, 4 keep-alive clients for 2 s.
        count = [0]
        stop = time.time() + 2

        def hammer():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            n = 0
            while time.time() < stop:
                c.request("GET", "/health")
                c.getresponse().read()
                n += 1
            count[0] += n

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return total, ttft, count[0] / 2
    finally:
        gw.stop()


def main():
    d_total, d_ttft = direct()
    g_total, g_ttft, rps = via_gateway()
    ms = lambda x: x * 1000
    res = {
        "requests": N,
        "direct_p50_ms": ms(pct(d_total, 50)), "direct_p99_ms": ms(pct(d_total, 99)),
        "gateway_p50_ms": ms(pct(g_total, 50)), "gateway_p99_ms": ms(pct(g_total, 99)),
        "added_p50_ms": ms(pct(g_total, 50) - pct(d_total, 50)), "added_p99_ms": ms(pct(g_total, 99) - pct(d_total, 99)),
        "ttft_direct_p50_ms": ms(pct(d_ttft, 50)), "ttft_gateway_p50_ms": ms(pct(g_ttft, 50)),
        "ttft_added_p50_ms": ms(pct(g_ttft, 50) - pct(d_ttft, 50)),
        "health_requests_per_s": rps,
    }
    print(json.dumps(res, indent=2))
    print(f"[bench] gateway adds {res['added_p50_ms']:.2f} ms p50 / {res['added_p99_ms']:.2f} ms p99 per request "
          f"({res['direct_p50_ms']:.2f} ms direct), {res['ttft_added_p50_ms']:.2f} ms to the first token; "
          f"/health {rps:.0f} requests/s", file=sys.stderr)


if __name__ == "__main__":
    main()
