"""Load under faults (#20): seven streaming clients against build/inkling-gateway on the demo
model while the engine is kill -9'd every ~7 s, ten times.

    python3 tests/gateway/load_faults_e2e.py BUILD

Each client streams chat completions in a loop and, as real clients do, waits out a 503 or 429
for its Retry-After before the next try. Checks: every request ends explicitly (a complete
stream, an SSE error event then [DONE], or 503/429 with Retry-After), none hangs (every read
has a deadline that fails the request), no other status, /health 200 again within 5 s of each
kill (with a new engine), and after the last kill every client completes a stream.

The ~7 s between kills is the scenario; no check waits on it: each waits on what it observes.
Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only.
"""
import http.client
import json
import os
import signal
import sys
import threading
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(BUILD, "demo-model")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway  # noqa: E402

checks = Checks("load under faults")
report = checks.report

CLIENTS = 7
KILLS = 10
KILL_EVERY_S = 7
HEALTHY_WITHIN_S = 5
READ_DEADLINE_S = 30    # one read of a response (status line, a header, an SSE line)
FINAL_DEADLINE_S = 120  # for every client to complete a stream after the last kill


def stream_once(port):
    """One streaming chat request, read to its end. ("complete" | "error_event" | "retry", detail,
    retry_after_s) or raises AssertionError naming what was not an explicit end."""
    body = json.dumps({"model": "demo-model", "stream": True, "max_tokens": 48,
                       "messages": [{"role": "user", "content": "tell me a fortune"}]})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=READ_DEADLINE_S)
    try:
        c.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status in (429, 503):
            retry = r.getheader("Retry-After")
            payload = r.read()
            if retry is None or not retry.strip().isdigit():
                raise AssertionError(f"{r.status} without a Retry-After: {payload[:200]!r}")
            return "retry", r.status, int(retry)
        if r.status != 200:
            raise AssertionError(f"status {r.status}: {r.read()[:300]!r}")
        lines = []
        while True:
            line = r.readline()  # each read within READ_DEADLINE_S, else socket.timeout
            if not line:
                break
            line = line.strip()
            if line.startswith(b"data: "):
                lines.append(line[6:])
        if not lines or lines[-1] != b"[DONE]":
            raise AssertionError(f"the stream ended without data: [DONE] (last: {lines[-2:]!r})")
        events = [json.loads(x) for x in lines[:-1]]
        if any("error" in e for e in events):
            return "error_event", events[-1].get("error"), 0
        finishes = [ch.get("finish_reason") for e in events for ch in e.get("choices", [])]
        if not finishes or finishes[-1] not in ("stop", "length"):
            raise AssertionError(f"a stream without an error event and without a finish_reason: {events[-2:]!r}")
        return "complete", finishes[-1], 0
    except (OSError, http.client.HTTPException) as e:
        raise AssertionError(f"{type(e).__name__}: {e}") from None
    finally:
        c.close()


class Client(threading.Thread):
    def __init__(self, port, stop, after_last_kill):
        super().__init__(daemon=True)
        self.port, self.stop, self.after_last_kill = port, stop, after_last_kill
        self.outcomes = {"complete": 0, "error_event": 0, "retry": 0}
        self.failures = []
        self.completed_after_last_kill = False

    def run(self):
        while not self.stop.is_set():
            started = time.time()
            try:
                kind, _, retry_after = stream_once(self.port)
            except AssertionError as e:
                self.failures.append(f"after {time.time() - started:.1f} s: {e}")
                continue
            self.outcomes[kind] += 1
            if kind == "complete" and self.after_last_kill.is_set():
                self.completed_after_last_kill = True
                return
            if kind == "retry":
                self.stop.wait(retry_after)


def health(g):
    try:
        return g.request("GET", "/health", timeout=2)[0]
    except OSError:
        return None


def engine(g):
    return json.loads(g.request("GET", "/v1/stats", timeout=10)[1])["engine"]


def main():
    g = Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--slots", "4", "--ctx", "512",
                 "--threads", "2"])
    stop, after_last_kill = threading.Event(), threading.Event()
    clients = [Client(g.port, stop, after_last_kill) for _ in range(CLIENTS)]
    recoveries = []
    try:
        for c in clients:
            c.start()
        for k in range(KILLS):
            time.sleep(KILL_EVERY_S)  # the scenario's spacing; nothing below depends on it
            pid = engine(g)["pid"]
            os.kill(pid, signal.SIGKILL)
            killed_at = time.time()
            if k == KILLS - 1:
                after_last_kill.set()
            # Healthy again: /health 200 with an engine other than the one killed.
            recovered = None
            while time.time() - killed_at < HEALTHY_WITHIN_S + 1:
                if health(g) == 200 and engine(g)["pid"] != pid:
                    recovered = time.time() - killed_at
                    break
                time.sleep(0.05)
            recoveries.append(recovered)
        deadline = time.time() + FINAL_DEADLINE_S
        for c in clients:
            c.join(max(0.0, deadline - time.time()))
    finally:
        stop.set()
        for c in clients:
            c.join(READ_DEADLINE_S + 5)
        state = None
        try:
            state = engine(g)
        except OSError:
            pass
        log = g.log_tail(3000)
        g.stop()

    failures = [f for c in clients for f in c.failures]
    totals = {k: sum(c.outcomes[k] for c in clients) for k in ("complete", "error_event", "retry")}
    print(f"outcomes over {CLIENTS} clients: {totals}; recovery after each kill (s): "
          f"{[None if r is None else round(r, 2) for r in recoveries]}", flush=True)
    report(f"every request ended explicitly: complete, error event + [DONE], or 503/429 with Retry-After; "
           f"no read past {READ_DEADLINE_S} s, no other status", not failures,
           f"{len(failures)} did not: {failures[:5]}; gateway log: {log}")
    report(f"/health 200 with a new engine within {HEALTHY_WITHIN_S} s of each of {KILLS} kills",
           len(recoveries) == KILLS and all(r is not None and r <= HEALTHY_WITHIN_S for r in recoveries),
           f"{recoveries}; gateway log: {log}")
    report("after the last kill every client completes a stream",
           all(c.completed_after_last_kill for c in clients),
           f"{sum(c.completed_after_last_kill for c in clients)} of {CLIENTS}; engine: {state}")
    report(f"the supervisor restarted the engine {KILLS} times and never gave up",
           state is not None and state.get("restarts", 0) >= KILLS and state.get("state") == "ready",
           state)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
