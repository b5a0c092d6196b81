"""Black-box tests of the gateway's engine supervision against a scripted engine
(tests/gateway/fake_engine.py): malformed telemetry, the engine's stderr, what the child
inherits. Fast: no model is loaded.

    python3 tests/gateway/supervisor_e2e.py BUILD

Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKE = os.path.join(ROOT, "tests", "gateway", "fake_engine.py")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway, read_all, read_until  # noqa: E402

checks = Checks("supervisor e2e")
report = checks.report
CHAT = json.dumps({"model": "fake", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})


def request(g, *args, **kw):
    """g.request, with a timeout as a status ("timeout") instead of an exception."""
    try:
        return g.request(*args, **kw)
    except OSError as e:
        return "timeout", str(e).encode(), {}


def start(*fake_args, wait=True, extra=()):
    argv = [os.path.join(BUILD, "inkling-gateway"), "--model", ROOT, "--model-id", "fake", "--engine", FAKE]
    argv += [f"--engine-arg={a}" for a in fake_args] + list(extra)
    return Gateway(argv, wait=wait)


def malformed_telemetry():
    """Item 11: JSON fields of the wrong type are a logged protocol error; neither the
    supervisor nor a connection's bookkeeping dies of them."""
    g = start("--fake-bad-json")
    try:
        statuses = [request(g, "GET", "/metrics", timeout=10)[0] for _ in range(20)]
        report("/metrics over an engine's wrongly typed STATS answers 200, twenty times (no leaked connection counts)",
               statuses == [200] * 20, statuses)
        st, body, _ = request(g, "GET", "/v1/stats", timeout=10)
        report("/v1/stats answers 200", st == 200, (st, body[:200]))
        st, body, _ = request(g, "POST", "/v1/chat/completions", CHAT, timeout=20)
        report("the supervisor survives malformed STATS/EVENT JSON: requests are still served",
               st == 200 and b'"content":"ok"' in body, (st, body[:200]))
        log = g.log_tail(20000)
        report("malformed engine JSON is logged as a protocol error", "protocol error" in log, log[-1500:])
    finally:
        g.stop()


def inherited_descriptors():
    """Item 10: the engine inherits stdin, stdout and stderr only, so a gateway killed while
    its engine runs leaves no listening socket behind."""
    g = start("--fake-linger")
    engine_pid = 0
    try:
        s = socket.create_connection(("127.0.0.1", g.port))  # a client connection to leak, too
        info = json.loads(g.request("GET", "/v1/stats", timeout=10)[1])["engine"]
        engine_pid, fds = info["pid"], info["info"].get("fds", {})
        report("the engine inherits only descriptors 0, 1 and 2", sorted(fds) == ["0", "1", "2"], fds)
        g.proc.send_signal(signal.SIGKILL)
        g.proc.wait(10)
        s.close()
        probe = socket.socket()
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", g.port))
            probe.listen()
            bound = True
        except OSError as e:
            bound = e
        finally:
            probe.close()
        report("after the gateway is killed, its port is free while the engine still runs",
               bound is True and engine_pid and os.path.exists(f"/proc/{engine_pid}"), (bound, engine_pid))
    finally:
        if engine_pid:
            try:
                os.kill(engine_pid, signal.SIGKILL)
            except OSError:
                pass
        g.stop()


def last_words():
    """Item 5: the engine's stderr is kept (bounded), forwarded with a prefix, and its last
    line explains a death in /health and /v1/stats."""
    last = "fatal: cannot map model-00001.safetensors: No such file or directory"
    g = start("--fake-stderr-flood", "200", "--fake-stderr", "loading the model\\n" + last,
              "--fake-exit-after-ready", "1", wait=False)
    try:
        seen, deadline = None, time.time() + 60
        while time.time() < deadline:
            st, body, _ = request(g, "GET", "/health", timeout=5)
            if st == 503 and last.encode() in body:
                seen = json.loads(body)
                break
            time.sleep(0.05)
        report("/health's reason for a dead engine carries its last stderr line",
               seen and "exited with status 1" in seen.get("reason", "") and last in seen["reason"], seen)
        stats = json.loads(request(g, "GET", "/v1/stats", timeout=5)[1])["engine"]
        tail = stats.get("stderr_tail", [])
        report("/v1/stats has the last stderr line and a bounded tail (50 lines of at most 1 KiB)",
               stats.get("last_stderr") == last and 0 < len(tail) <= 50 and max(map(len, tail)) <= 1024 + 6,
               (stats.get("last_stderr"), len(tail), max(map(len, tail)) if tail else 0))
        log = g.log_tail(200000)
        report("the engine's stderr is forwarded to the gateway's log with a prefix",
               f"] {last}" in log and "[engine " in log and "x" * 2000 not in log, log[-600:])
    finally:
        g.stop()


def flag_ranges():
    """Item 17: --max-tokens is checked against the protocol's max_tokens range."""
    for value in ("0", "1048577"):
        r = subprocess.run([os.path.join(BUILD, "inkling-gateway"), "--model", ROOT, "--engine", FAKE,
                            "--max-tokens", value, "--port", "1"], capture_output=True, text=True, timeout=30)
        report(f"--max-tokens {value} is refused at start-up, naming the range",
               r.returncode != 0 and "--max-tokens must lie in 1..1048576" in r.stderr, (r.returncode, r.stderr[-300:]))


def chat_body(first_turn, max_tokens=2):
    return json.dumps({"model": "fake", "max_tokens": max_tokens, "messages": [{"role": "user", "content": first_turn}]})


def affinity_memory():
    """Item 7: the slot-affinity map keeps 64-bit keys, bounded (LRU), stored after ACCEPT:
    refused prompts of any size leave nothing behind."""
    g = start("--fake-refuse", "CONTEXT_EXCEEDED", extra=["--max-body", str(64 << 20)])
    try:
        statuses = [request(g, "POST", "/v1/chat/completions", chat_body(f"{i}" + "x" * (12 << 20)), timeout=60)[0]
                    for i in range(5)]
        aff = json.loads(request(g, "GET", "/v1/stats", timeout=10)[1])["gateway"]["affinity"]
        report("five refused 12 MB prompts leave the affinity map empty (stored only after ACCEPT)",
               statuses == [400] * 5 and aff["entries"] == 0, (statuses, aff))
    finally:
        g.stop()
    g = start(extra=["--affinity-entries", "3"])
    try:
        statuses = [request(g, "POST", "/v1/chat/completions", chat_body(f"conversation {i} " + "y" * 100000),
                            timeout=20)[0] for i in range(5)]
        aff = json.loads(request(g, "GET", "/v1/stats", timeout=10)[1])["gateway"]["affinity"]
        report("--affinity-entries 3: five conversations keep three entries of a fixed size, whatever their prompts",
               statuses == [200] * 5 and aff["entries"] == 3 and aff["capacity"] == 3 and aff["bytes"] < 1000,
               (statuses, aff))
    finally:
        g.stop()


def held_stream(g, forwarded_for=None):
    """A streaming request the --fake-hold engine never finishes, read up to its first token."""
    s = socket.create_connection(("127.0.0.1", g.port), timeout=20)
    body = json.dumps({"model": "fake", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": "hold"}]})
    xff = f"X-Forwarded-For: {forwarded_for}\r\n" if forwarded_for else ""
    s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{xff}"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    read_until(s, b'"content":"ok"', timeout=20)
    return s


def status_via(g, path, forwarded_for=None):
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    return request(g, "GET", path, headers=headers, timeout=10)[0]


def proxies_and_caps():
    """Item 6: the caps are flags, /health and /metrics pass the per-address cap, and
    X-Forwarded-For is honoured only from --trusted-proxy addresses."""
    g = start("--fake-hold", extra=["--max-connections-per-address", "2", "--slots", "8"])
    try:
        held = [held_stream(g) for _ in range(2)]
        got = {p: status_via(g, p) for p in ("/v1/models", "/health", "/metrics")}
        report("--max-connections-per-address 2: a third connection gets 429 on /v1/models, 200 on /health and /metrics",
               got == {"/v1/models": 429, "/health": 200, "/metrics": 200}, got)
        spoofed = status_via(g, "/v1/models", forwarded_for="10.9.9.9")
        report("X-Forwarded-For from a peer that is not a trusted proxy is ignored", spoofed == 429, spoofed)
        for s in held:
            s.close()
    finally:
        g.stop()
    g = start("--fake-hold", extra=["--max-connections-per-address", "2", "--slots", "8", "--trusted-proxy", "127.0.0.1"])
    try:
        held = [held_stream(g, "10.0.0.1") for _ in range(2)]
        held += [held_stream(g, "10.0.0.2, 127.0.0.1")]  # a chain: the rightmost untrusted hop
        got = {"10.0.0.1": status_via(g, "/v1/models", "10.0.0.1"), "10.0.0.2": status_via(g, "/v1/models", "10.0.0.2"),
               "health": status_via(g, "/health", "10.0.0.1")}
        report("behind a trusted proxy the cap counts each X-Forwarded-For client's requests, not the proxy's address",
               got == {"10.0.0.1": 429, "10.0.0.2": 200, "health": 200}, got)
        for s in held:
            s.close()
    finally:
        g.stop()
    r = subprocess.run([os.path.join(BUILD, "inkling-gateway"), "--model", ROOT, "--engine", FAKE,
                        "--trusted-proxy", "nginx.local", "--port", "1"], capture_output=True, text=True, timeout=30)
    report("a --trusted-proxy that is not an IP address is refused at start-up",
           r.returncode != 0 and "--trusted-proxy nginx.local is not an IP address" in r.stderr, r.stderr[-300:])


def health_until(g, wanted, seconds=60):
    """Polls /health until `wanted(status, body)`; every (status, body) seen, in order."""
    seen, deadline = [], time.time() + seconds
    while time.time() < deadline:
        st, body, _ = request(g, "GET", "/health", timeout=5)
        seen.append((st, body))
        if wanted(st, body):
            break
        time.sleep(0.05)
    return seen


def restarts(g):
    """engine.restarts from /v1/stats (-1 while the gateway does not answer)."""
    st, body, _ = request(g, "GET", "/v1/stats", timeout=5)
    return json.loads(body)["engine"]["restarts"] if st == 200 else -1


def never_gives_up():
    """Item 4: deaths before READY or soon after it back off exponentially and say so; an
    engine that served before it died is restarted at once; nothing stops it for good."""
    g = start("--fake-exit-after-ready", "1", wait=False, extra=["--restart-backoff-max", "2"])
    try:
        seen = health_until(g, lambda st, b: b"crash loop" in b)
        body = seen[-1][1]
        report("quick deaths: /health 503 'failed', 'crash loop', the next attempt",
               seen[-1][0] == 503 and b'"failed"' in body and b"crash loop: 3 deaths in a row" in body
               and b"next attempt in" in body, seen[-1])
        first = restarts(g)
        deadline = time.time() + 30
        while time.time() < deadline and restarts(g) < first + 3:
            time.sleep(0.1)
        report("... the backoff is capped (--restart-backoff-max 2) and it keeps trying", restarts(g) >= first + 3,
               (first, restarts(g)))
    finally:
        g.stop()
    # --restart-settle 0: every death after READY counts as served: restarted at once, never failed.
    g = start("--fake-exit-after-ready", "1", wait=False, extra=["--restart-settle", "0"])
    try:
        seen, count, deadline = [], 0, time.time() + 30
        while time.time() < deadline and count < 8:
            seen.append(request(g, "GET", "/health", timeout=5)[1])
            count = restarts(g)
        report("engines that die after READY are restarted at once, and never marked failed",
               count >= 8 and not any(b'"failed"' in b for b in seen), (count, [b for b in seen if b'"failed"' in b][:2]))
    finally:
        g.stop()


def poison_request():
    """A request that kills every engine it reaches fails itself after its retries (500
    engine_crashed, no Retry-After: retrying would kill the next engine too); the engine is
    never marked failed and everyone else is served."""
    g = start("--fake-die-on", "POISON")
    try:
        st, body, headers = request(g, "POST", "/v1/chat/completions", chat_body("POISON please"), timeout=60)
        err = json.loads(body).get("error", {}) if st != "timeout" else {}
        report("a poison request: 500 engine_crashed after its three tries, no Retry-After",
               st == 500 and err.get("code") == "engine_crashed" and "3 times" in err.get("message", "")
               and "Retry-After" not in headers, (st, body[:300], headers))
        log = g.log_tail(20000)
        health = health_until(g, lambda s, b: s == 200, seconds=30)[-1]
        report("... the engine was restarted three times and never marked failed",
               restarts(g) == 3 and "-> failed" not in log and health[0] == 200, (restarts(g), health, log[-800:]))
        st, body, _ = request(g, "POST", "/v1/chat/completions", CHAT, timeout=20)
        report("... and the next request is served", st == 200 and b'"content":"ok"' in body, (st, body[:200]))
    finally:
        g.stop()


def hosts_and_shutdown():
    """Host names are case-insensitive; while the gateway drains (SIGTERM) a keep-alive
    connection opened before the signal cannot start new work (503 draining, closed)."""
    g = start("--fake-hold", extra=["--allowed-host", "Inkling.lan"])
    try:
        answers = [request(g, "GET", "/v1/models", headers={"Host": h}, timeout=10)[0]
                   for h in (f"LOCALHOST:{g.port}", f"inkling.lan:{g.port}", "INKLING.LAN", "evil.example")]
        report("Host names match whatever their case (LOCALHOST, inkling.lan for --allowed-host Inkling.lan); "
               "a foreign one is still 403", answers == [200, 200, 200, 403], answers)
        keep = http.client.HTTPConnection("127.0.0.1", g.port, timeout=20)
        keep.request("GET", "/v1/models")
        first = keep.getresponse()
        first.read()
        held = held_stream(g)
        pid = json.loads(request(g, "GET", "/v1/stats", timeout=10)[1])["engine"]["pid"]
        g.proc.send_signal(signal.SIGTERM)
        health_until(g, lambda st, b: b"draining" in b, seconds=20)
        keep.request("POST", "/v1/chat/completions", body=json.dumps(CHAT), headers={"Content-Type": "application/json"})
        r = keep.getresponse()
        body = r.read()
        err = json.loads(body).get("error", {}) if body.startswith(b"{") else {}
        report("while draining, a keep-alive connection's new request gets 503 draining and the connection closes",
               first.status == 200 and r.status == 503 and err.get("code") == "draining"
               and (r.getheader("Connection") or "").lower() == "close", (r.status, body[:200], r.getheaders()))
        rest = read_releasing(held, pid)
        report("... while the stream in flight still finishes", b"[DONE]" in rest, rest[-300:])
        g.proc.wait(30)
    finally:
        g.stop()


def frozen_engine():
    """Item 3: a frozen engine (kill -STOP) is noticed by the watchdog: /health 503
    unresponsive, the engine killed and restarted; requests do not hang."""
    g = start(extra=["--engine-ping", "1", "--engine-deadline", "2"])
    stopped = 0
    try:
        stopped = json.loads(request(g, "GET", "/v1/stats", timeout=5)[1])["engine"]["pid"]
        os.kill(stopped, signal.SIGSTOP)
        seen = health_until(g, lambda st, b: b"unresponsive" in b, seconds=30)
        report("after kill -STOP of the engine, /health turns 503 'unresponsive' (no answer to STATS within 2 s)",
               seen[-1][0] == 503 and b"no answer to STATS within 2.0 s" in seen[-1][1], seen[-1])
        seen = health_until(g, lambda st, b: st == 200, seconds=30)
        pid = json.loads(request(g, "GET", "/v1/stats", timeout=5)[1])["engine"]["pid"]
        report("... the frozen engine is killed and a new one serves", seen[-1][0] == 200 and pid not in (0, stopped)
               and (not os.path.exists(f"/proc/{stopped}/status") or _zombie(stopped)), (seen[-1], pid, stopped))
        st, body, _ = request(g, "POST", "/v1/chat/completions", CHAT, timeout=20)
        report("... and requests are answered again", st == 200, (st, body[:200]))
    finally:
        if stopped:
            try:
                os.kill(stopped, signal.SIGKILL)
            except OSError:
                pass
        g.stop()
    g = start("--fake-hang-before-ready", wait=False, extra=["--engine-start-deadline", "2"])
    try:
        seen = health_until(g, lambda st, b: b"no READY and no load progress within 2.0 s" in b, seconds=30)
        report("an engine that never sends READY is unresponsive after --engine-start-deadline and restarted",
               b"no READY and no load progress within 2.0 s" in seen[-1][1], seen[-1])
    finally:
        g.stop()


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line for line in f)
    except OSError:
        return True


def stalled_reader():
    """Item 8: a client that never reads its stream cannot hold a slot: after
    --write-deadline the request is CANCELled, the slot freed, the connection closed."""
    g = start("--fake-flood", extra=["--write-deadline", "2", "--slots", "1"])
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", g.port))
        body = json.dumps({"model": "fake", "stream": True, "max_tokens": 1000000,
                           "messages": [{"role": "user", "content": "flood"}]})
        s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        active, deadline = None, time.time() + 90
        while time.time() < deadline:
            st, resp, _ = request(g, "GET", "/v1/stats", timeout=5)
            if st == 200:
                active = json.loads(resp)["gateway"]["active"]
                if active == 0 and "read nothing for 2 s" in g.log_tail(4000):
                    break
            time.sleep(0.2)
        report("a client that never reads: CANCELled after --write-deadline, its slot free again",
               active == 0 and "read nothing for 2 s" in g.log_tail(4000), (active, g.log_tail(600)))
        s.close()
    finally:
        g.stop()


def hangup_after_stray_bytes():
    """Item 9 (in part): the hang-up watcher keeps watching after bytes arrive (a stray CRLF
    after the body); it used to stop at the first byte, so a later hang-up went unnoticed."""
    g = start("--fake-hold", extra=["--slots", "1"])
    try:
        s = socket.create_connection(("127.0.0.1", g.port), timeout=20)
        body = json.dumps({"model": "fake", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
        s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        read_until(s, b'"content":"ok"', timeout=20)
        s.sendall(b"\r\n")  # a stray CRLF while the stream runs
        st1 = json.loads(request(g, "GET", "/v1/stats", timeout=5)[1])["gateway"]["active"]
        s.close()
        active, deadline = None, time.time() + 30
        while time.time() < deadline and active != 0:
            active = json.loads(request(g, "GET", "/v1/stats", timeout=5)[1])["gateway"]["active"]
            time.sleep(0.1)
        report("a hang-up after a stray CRLF still CANCELs the request and frees its slot", st1 == 1 and active == 0,
               (st1, active))
    finally:
        g.stop()


def gateway_stats(g):
    """/v1/stats as JSON ({} while the gateway does not answer)."""
    st, body, _ = request(g, "GET", "/v1/stats", timeout=5)
    return json.loads(body) if st == 200 else {}


def wait_for(what, seconds=30):
    """Polls `what()` until it is truthy or `seconds` pass; its last value."""
    deadline, value = time.time() + seconds, None
    while time.time() < deadline:
        value = what()
        if value:
            break
        time.sleep(0.05)
    return value


def active(g):
    return gateway_stats(g).get("gateway", {}).get("active", -1)


def post_raw(g, body, half_close=False):
    """A POST to /v1/chat/completions on a socket of its own; `half_close`: shutdown(SHUT_WR)
    right after the request, as `nc -N` and HTTP/1.0-style clients do."""
    s = socket.create_connection(("127.0.0.1", g.port), timeout=30)
    s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    if half_close:
        s.shutdown(socket.SHUT_WR)
    return s


def parse_response(data):
    """(status, {lower-case header: value}, body bytes) of a raw HTTP/1.1 response, past any
    interim 1xx responses (a half-closed client is sent `100 Continue` probes)."""
    while data.startswith(b"HTTP/1.1 1"):
        data = data.partition(b"\r\n\r\n")[2]
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/") else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def sse_events(body):
    """The JSON of every `data:` event of an SSE body, and whether [DONE] ended it."""
    events, done = [], False
    for block in body.decode(errors="replace").split("\n\n"):
        for line in block.split("\n"):
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events, done


def streamed_text(events):
    return "".join(e["choices"][0]["delta"].get("content", "") for e in events if e.get("choices"))


def stream_body(content="x"):
    return json.dumps({"model": "fake", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": content}]})


def cancel_logged(g, engine_id):
    """The --fake-log-control engine's stderr line for a CANCEL of `engine_id`, as the gateway logs it."""
    return wait_for(lambda: f"fake: CANCEL {engine_id}" in g.log_tail(100000), seconds=15)


def accept_deadline():
    """Item 3: every wait on the engine has a deadline. An engine that is alive but never
    ACCEPTs: after --accept-deadline the request gets 503 + Retry-After (nothing was sent
    yet), its engine id is CANCELled and released, the slot is free."""
    g = start("--fake-silent", "--fake-log-control", extra=["--accept-deadline", "2", "--slots", "1"])
    try:
        t0 = time.time()
        st, body, headers = request(g, "POST", "/v1/chat/completions", CHAT, timeout=60)
        err = json.loads(body).get("error", {}) if st == 503 else {}
        report("no ACCEPT within --accept-deadline 2: 503 + Retry-After, code engine_timeout, naming the bound",
               st == 503 and headers.get("Retry-After") == "1" and err.get("code") == "engine_timeout"
               and "within 2 s" in err.get("message", "") and time.time() - t0 < 30, (st, body[:300], headers))
        report("... its engine id is CANCELled, and the slot is free (active 0)",
               cancel_logged(g, "g1") and active(g) == 0, (active(g), g.log_tail(800)))
        s = post_raw(g, stream_body())
        status, _, rest = parse_response(read_all(s, timeout=60))
        s.close()
        report("... a streaming request too: a 503 error object, never a committed stream",
               status == 503 and b'"engine_timeout"' in rest and cancel_logged(g, "g2"), (status, rest[:300]))
    finally:
        g.stop()
    r = subprocess.run([os.path.join(BUILD, "inkling-gateway"), "--model", ROOT, "--engine", FAKE,
                        "--frame-deadline", "0", "--port", "1"], capture_output=True, text=True, timeout=30)
    report("--frame-deadline 0 is refused at start-up", r.returncode != 0 and "--frame-deadline must be at least 1" in r.stderr,
           (r.returncode, r.stderr[-300:]))


def frame_deadline():
    """Item 3: an accepted request whose engine goes silent ends after --frame-deadline:
    mid-stream an SSE error event and [DONE], before any byte a 503 + Retry-After; the id is
    CANCELled and released."""
    g = start("--fake-hold", "--fake-log-control", extra=["--frame-deadline", "2", "--slots", "1"])
    try:
        s = post_raw(g, stream_body())
        status, headers, body = parse_response(read_all(s, timeout=60))
        s.close()
        events, done = sse_events(body)
        last = events[-1] if events else {}
        report("a stream the engine stops feeding: its first token, then an SSE error event (engine_timeout) and [DONE]",
               status == 200 and streamed_text(events) == "ok" and done
               and last.get("error", {}).get("code") == "engine_timeout"
               and "sent nothing for this request within 2 s" in last["error"].get("message", ""), body[-400:])
        report("... its engine id is CANCELled, and the slot is free", cancel_logged(g, "g1") and active(g) == 0,
               (active(g), g.log_tail(800)))
        st, body, headers = request(g, "POST", "/v1/chat/completions", CHAT, timeout=60)
        report("not streaming: 503 + Retry-After with the same error, the id CANCELled",
               st == 503 and headers.get("Retry-After") == "1" and b'"engine_timeout"' in body and cancel_logged(g, "g2"),
               (st, body[:300], headers))
    finally:
        g.stop()


def reply_file(tokens):
    fd, path = tempfile.mkstemp(prefix="fake-reply-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(tokens, f)
    return path


def read_releasing(s, pid, seconds=30):
    """Everything the gateway sends on `s` until it closes, SIGUSR1-ing the --fake-hold engine
    (it finishes the requests it holds) meanwhile: a signal that comes before the engine holds
    the request releases nothing, so it is sent again until the answer has come."""
    data, deadline = b"", time.time() + seconds
    s.settimeout(0.2)
    while time.time() < deadline:
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass  # that engine is gone (the checks on what was read say whether it should be)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
    return data


def half_close():
    """Item 9: a client that half-closes (shutdown(SHUT_WR) after its request) still gets its
    whole answer, streamed or not; a half-close used to count as a hang-up and CANCEL it."""
    reply = reply_file(["ok", " one", " two"])
    g = start("--fake-hold", "--fake-reply", reply, "--fake-log-control", extra=["--slots", "2"])
    try:
        pid = gateway_stats(g)["engine"]["pid"]
        s = post_raw(g, stream_body())
        head = read_until(s, b'"content":"ok"', timeout=30)
        s.shutdown(socket.SHUT_WR)
        # A request on another connection is answered after the gateway has read this FIN (it
        # was on the socket first); the held stream must still be running then.
        still = active(g)
        status, _, body = parse_response(head + read_releasing(s, pid))
        s.close()
        events, done = sse_events(body)
        finish = [e["choices"][0].get("finish_reason") for e in events if e.get("choices")][-1:]
        report("a streaming client that half-closes after its first token gets the whole stream",
               still == 1 and status == 200 and streamed_text(events) == "ok one two" and finish == ["stop"] and done,
               (still, status, body[-400:]))
        s = post_raw(g, json.dumps({"model": "fake", "max_tokens": 5, "messages": [{"role": "user", "content": "y"}]}),
                     half_close=True)
        status, _, body = parse_response(read_releasing(s, pid))
        s.close()
        content = json.loads(body)["choices"][0]["message"]["content"] if status == 200 else None
        report("a non-streaming request sent with a half-close (as nc -N sends) gets its whole answer",
               status == 200 and content == "ok one two", (status, body[:300]))
        report("... and neither request was CANCELled", "fake: CANCEL" not in g.log_tail(100000), g.log_tail(600))
    finally:
        g.stop()
        os.unlink(reply)


def full_close_mid_stream():
    """Item 9: a real hang-up is still noticed. A client that closes its connection while its
    stream waits on the engine (no byte flowing) frees its slot: its FIN alone looks like a
    half-close, so the gateway writes an SSE comment, which a closed socket answers with a
    reset. Also after a half-close first."""
    g = start("--fake-hold", "--fake-log-control", extra=["--slots", "1"])
    try:
        for n, half_first in ((1, False), (2, True)):
            s = post_raw(g, stream_body())
            read_until(s, b'"content":"ok"', timeout=30)
            if half_first:
                s.shutdown(socket.SHUT_WR)
                probe = read_until(s, b":\n\n", timeout=30)
                report("a half-closed client's stream is sent one SSE comment (the probe), nothing else",
                       probe == b":\n\n", probe)
            s.close()
            report(f"a client that closes mid-stream{' after a half-close' if half_first else ''}: CANCEL, slot freed",
                   cancel_logged(g, f"g{n}") and wait_for(lambda: active(g) == 0), (active(g), g.log_tail(600)))
        # Not streaming, nothing written yet: the gateway's probe is an interim 100 Continue.
        s = post_raw(g, json.dumps({"model": "fake", "max_tokens": 5, "messages": [{"role": "user", "content": "z"}]}))
        running = wait_for(lambda: active(g) == 1)
        s.close()
        report("a non-streaming request whose client closes while it runs: CANCEL, slot freed",
               running and cancel_logged(g, "g3") and wait_for(lambda: active(g) == 0), (running, active(g), g.log_tail(600)))
        s = post_raw(g, stream_body())
        first = read_until(s, b'"content":"ok"', timeout=30)
        s.close()
        report("... and the one slot serves the next request", b'"content":"ok"' in first, first[-200:])
    finally:
        g.stop()


def main():
    flag_ranges()
    accept_deadline()
    frame_deadline()
    half_close()
    full_close_mid_stream()
    hangup_after_stray_bytes()
    stalled_reader()
    frozen_engine()
    poison_request()
    hosts_and_shutdown()
    never_gives_up()
    proxies_and_caps()
    affinity_memory()
    malformed_telemetry()
    last_words()
    inherited_descriptors()
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
