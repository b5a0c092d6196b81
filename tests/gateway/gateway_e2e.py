"""Black-box tests of build/inkling-gateway with a real engine on the demo model:
supervision faults, audio end to end, admission, auth and guards, SIGTERM draining.

    python3 tests/gateway/gateway_e2e.py BUILD

Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only.
"""
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(BUILD, "demo-model")
AUDIO = os.path.join(ROOT, "tests", "fixtures", "audio")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway as Started, free_port, read_all, read_until  # noqa: E402

checks = Checks("gateway e2e")
report = checks.report


class Gateway(Started):
    """inkling-gateway on the demo model, and the requests this suite sends it."""

    def __init__(self, *extra, slots=2, key=None):
        args = [os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--slots", str(slots), "--ctx", "1024",
                "--threads", "2"] + list(extra)
        if key:
            args += ["--api-key", key]
        super().__init__(args, key=key)

    def chat(self, content, **kw):
        body = {"model": "demo-model", "messages": [{"role": "user", "content": content}], "max_tokens": 4}
        body.update(kw)
        return self.request("POST", "/v1/chat/completions", body)

    def stats(self):
        return json.loads(self.request("GET", "/v1/stats")[1])

    def metric(self, name):
        text = self.request("GET", "/metrics")[1].decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def open_stream(self, max_tokens=800):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        body = json.dumps({"model": "demo-model", "stream": True, "max_tokens": max_tokens,
                           "messages": [{"role": "user", "content": "tell me a long story"}]})
        auth = f"Authorization: Bearer {self.key}\r\n" if self.key else ""
        s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"{auth}Content-Length: {len(body)}\r\n\r\n{body}").encode())
        return s


# The engine's fault hook that holds a request after this many tokens until a STOP or CANCEL
# names it (docs/configuration.md, "Fault hooks"): a stream opened with more than this is
# certainly in flight when the test acts on it (a kill, a hang-up, a full queue), whatever
# the model would say, and at any speed. Requests of HOLD tokens or fewer never hold.
HOLD = 8
HOLD_ARG = f"--engine-arg=--fault-hold-after={HOLD}"


def dmel_frames(path):
    """The DMel frames of a WAV clip, as inkling-dmel computes them (the gateway's own code)."""
    out = os.path.join(tempfile.gettempdir(), f"gw-e2e-{os.getpid()}.dmel")
    try:
        r = subprocess.run([os.path.join(BUILD, "inkling-dmel"), path, out, "--json"], capture_output=True,
                           text=True, timeout=60, check=True)
        return json.loads(r.stdout)["n_frames"]
    finally:
        if os.path.exists(out):
            os.unlink(out)


def engine_stats_after(g, done):
    """The engine's STATS once it has finished `done` requests (it sends STATS after each
    DONE, which may reach the gateway after the HTTP answer); None past the deadline."""
    deadline = time.time() + 30
    while time.time() < deadline:
        st = (g.stats()["engine"].get("stats") or {})
        if st.get("requests_done", -1) >= done:
            return st
        time.sleep(0.05)
    return None


def wav_part(path):
    data = base64.b64encode(open(path, "rb").read()).decode()
    return {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}


def main():
    tmp = tempfile.mkdtemp(prefix="inkling-gw-")

    # -- the engine dies before ACCEPT: the request is retried on the next engine ----------
    g = Gateway("--engine-arg=--fault-kill-once-file", "--engine-arg=" + os.path.join(tmp, "killed"))
    try:
        status, body, _ = g.chat("hello")
        report("engine killed before ACCEPT: the request still succeeds", status == 200, (status, body[:200]))
        report("the transparent retry is counted", (g.metric("inkling_requests_retried_total") or 0) >= 1)
        report("the restart is counted in /metrics", (g.metric("inkling_engine_restarts_total") or 0) >= 1)
    finally:
        g.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    g = Gateway(HOLD_ARG, slots=1)
    try:
        # -- kill -9 mid-stream: an error event and [DONE], then the next request works ----
        # (the stream holds after HOLD tokens: the kill lands mid-stream).
        s = g.open_stream()
        head = read_until(s, b'"content"')
        pid = g.stats()["engine"]["pid"]
        os.kill(pid, signal.SIGKILL)
        # /health is 503 from the death until the next engine's READY (a quick death: 250 ms
        # of backoff, then a load): watched until it says so or a new engine is up.
        saw_503, deadline = False, time.time() + 30
        while not saw_503 and time.time() < deadline:
            saw_503 = g.request("GET", "/health")[0] == 503
            engine = g.stats()["engine"]
            if not saw_503 and engine["restarts"] >= 1 and engine["state"] == "ready":
                break
        rest = read_all(s)
        s.close()
        text = (head + rest).decode(errors="replace")
        report("engine killed mid-stream: the stream ends with an error event and [DONE]",
               '"error"' in text and text.rstrip().endswith("data: [DONE]"), text[-300:])
        report("/health answers 503 while the engine restarts", saw_503)
        status, _, _ = g.chat("after the crash")
        report("after a mid-stream crash the next request succeeds", status == 200, status)

        # -- the client goes away: CANCEL, and the slot is free again ---------------------
        # The stream holds after HOLD tokens and never ends by itself: with one slot, the next
        # request runs only if the hang-up's CANCEL freed it.
        s = g.open_stream()
        read_until(s, b'"content"')
        s.close()
        try:
            status = g.chat("next in line")[0]
        except OSError as e:
            status = e
        report("a client that hangs up frees its slot (CANCEL)", status == 200, status)
        report("the cancel is counted", (g.metric("inkling_client_cancels_total") or 0) >= 1)
    finally:
        g.stop()

    # A fresh engine, whose STATS count exactly the requests below.
    g = Gateway(slots=1)
    try:
        # -- audio at any rate, mono and stereo, 16-bit and float ------------------------
        # Each clip adds its DMel frames as placeholders, in a user block of its own: the
        # role marker, <|content_audio_input|>, the frames, <|audio_end|>, <|end_message|>
        # (protocol/tml_render.cpp), so the prompt grows by frames + 4 tokens. The engine
        # saw the frames: it counted that prompt and its slot is tainted by audio (STATS).
        question = [{"type": "text", "text": "what is said?"}]
        st, body, _ = g.request("POST", "/v1/chat/completions", {
            "model": "demo-model", "max_tokens": 2, "messages": [{"role": "user", "content": question}]})
        text_tokens = json.loads(body)["usage"]["prompt_tokens"] if st == 200 else None
        done = 1
        wavs = sorted(f for f in os.listdir(AUDIO) if f.endswith(".wav"))
        bad = []
        for f in wavs:
            frames = dmel_frames(os.path.join(AUDIO, f))
            before = engine_stats_after(g, done) or {}
            st, body, _ = g.request("POST", "/v1/chat/completions", {
                "model": "demo-model", "max_tokens": 2,
                "messages": [{"role": "user", "content": question + [wav_part(os.path.join(AUDIO, f))]}]})
            if st != 200:
                bad.append((f, st, body[:120]))
                continue
            done += 1
            prompt = json.loads(body)["usage"]["prompt_tokens"]
            after = engine_stats_after(g, done) or {}
            seen = after.get("prompt_tokens", 0) - before.get("prompt_tokens", 0)
            tainted = [x.get("tainted") for x in after.get("slots", [])]
            if text_tokens is None or prompt != text_tokens + frames + 4 or seen != prompt or tainted != [True]:
                bad.append((f, f"{frames} frames", f"prompt {text_tokens} -> {prompt}", f"engine counted {seen}",
                            f"slots tainted {tainted}"))
        report(f"audio end to end: {len(wavs)} WAVs (rates, channels, encodings): each prompt grows by the clip's "
               f"frames, the engine feeds them", not bad and wavs and text_tokens, bad)
        corpus = {
            "not base64": "%%%%",
            "not RIFF": base64.b64encode(b"hello world, not a wav file at all").decode(),
            "truncated": base64.b64encode(open(os.path.join(AUDIO, wavs[0]), "rb").read()[:60]).decode(),
            "empty": "",
            "bad padding": "aGVsbG8===",
        }
        wrong = []
        for name, data in corpus.items():
            st, body, _ = g.request("POST", "/v1/chat/completions", {
                "model": "demo-model",
                "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}]}]})
            if st != 400 or b"input_audio" not in body:
                wrong.append((name, st, body[:120]))
        report("malformed audio is a 400 naming the part", not wrong, wrong)

        # -- admission: a full queue is a 429 with Retry-After ------------------------------
    finally:
        g.stop()

    g = Gateway("--max-queue", "0", HOLD_ARG, slots=1)
    try:
        # The stream holds after HOLD tokens: the slot is surely busy when the next one comes.
        s = g.open_stream(max_tokens=900)
        read_until(s, b'"content"')
        st, body, headers = g.chat("one too many")
        report("past the queue: 429 with Retry-After", st == 429 and "Retry-After" in headers, (st, body[:100]))
        s.close()
    finally:
        g.stop()

    # -- over the per-address connection cap: 429 and closed, never queued; /health passes --
    g = Gateway()
    try:
        held = [socket.create_connection(("127.0.0.1", g.port)) for _ in range(8)]
        answers = []
        for path in ("/v1/models", "/health"):
            extra = socket.create_connection(("127.0.0.1", g.port))
            extra.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            answers.append(read_all(extra, timeout=10))
            extra.close()
        for h in held:
            h.close()
        report("a 9th connection from one address gets 429 with Retry-After, but /health still answers",
               answers[0].startswith(b"HTTP/1.1 429") and b"Retry-After: 1" in answers[0]
               and answers[1].startswith(b"HTTP/1.1 200"), [a[:80] for a in answers])
    finally:
        g.stop()

    # -- a faked device loss: the engine is restarted at a quiet moment --------------------
    g = Gateway("--engine-arg=--fault-device-lost-after", "--engine-arg=1")
    try:
        st1, _, _ = g.chat("first")
        deadline = time.time() + 30
        while time.time() < deadline and (g.metric("inkling_engine_restarts_total") or 0) < 1:
            time.sleep(0.1)
        st2, _, _ = g.chat("second")
        report("device lost: restart and device loss counted, requests continue",
               st1 == 200 and st2 == 200 and (g.metric("inkling_device_losses_total") or 0) >= 1
               and (g.metric("inkling_engine_restarts_total") or 0) >= 1,
               (st1, st2, g.metric("inkling_device_losses_total"), g.metric("inkling_engine_restarts_total")))
    finally:
        g.stop()

    # -- auth, guards --------------------------------------------------------------------
    g = Gateway(key="s3cret")
    try:
        g.key = None
        st_none = g.request("GET", "/v1/models")[0]
        st_bearer = g.request("GET", "/v1/models", headers={"Authorization": "Bearer s3cret"})[0]
        st_x = g.request("GET", "/v1/models", headers={"x-api-key": "s3cret"})[0]
        st_wrong = g.request("GET", "/v1/models", headers={"Authorization": "Bearer s3cre"})[0]
        st_health, health, _ = g.request("GET", "/health")
        st_metrics = g.request("GET", "/metrics")[0]
        report("API key: 401 without or with a wrong key, 200 with Bearer or x-api-key",
               (st_none, st_bearer, st_x, st_wrong) == (401, 200, 200, 401), (st_none, st_bearer, st_x, st_wrong))
        report("with a key, /health stays public but hides details and /metrics needs the key",
               st_health == 200 and b"engine" not in health and st_metrics == 401, (st_health, health, st_metrics))
        st_host = g.request("GET", "/health", headers={"Host": "evil.example"})[0]
        report("a foreign Host header is refused (DNS rebinding guard)", st_host == 403, st_host)
    finally:
        g.stop()
    r = subprocess.run([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--host", "0.0.0.0",
                        "--port", str(free_port())], capture_output=True, text=True, timeout=30)
    report("a non-loopback bind without a key is refused", r.returncode != 0 and "API key" in r.stderr,
           (r.returncode, r.stderr[-200:]))

    # -- SIGTERM drains: the stream in flight completes, then the gateway exits 0 -----------
    g = Gateway()
    s = g.open_stream(max_tokens=60)
    read_until(s, b'"content"')
    g.proc.send_signal(signal.SIGTERM)
    rest = read_all(s).decode(errors="replace")
    s.close()
    try:
        code = g.proc.wait(30)
    except subprocess.TimeoutExpired:
        code = None
    g.stop()
    report("SIGTERM: the stream in flight finishes, then exit 0",
           rest.rstrip().endswith("data: [DONE]") and '"error"' not in rest and code == 0, (code, rest[-200:]))

    # -- a crash loop: /health says failed, why and when the next attempt is; it keeps trying --
    gw = Started([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--engine", "/bin/false"], wait=False)
    try:
        body, status, headers, deadline = b"", 0, {}, time.time() + 40
        while time.time() < deadline:
            try:
                status, body, headers = gw.request("GET", "/health", timeout=5)
                if b"crash loop" in body:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        report("an engine that keeps crashing: /health 503 'failed', the reason and the next attempt",
               status == 503 and b'"failed"' in body and b"crash loop" in body and b"next attempt in" in body
               and b"retry_in_s" in body and int(headers.get("Retry-After", "0")) >= 1, (status, body, headers))
        first = json.loads(gw.request("GET", "/v1/stats", timeout=5)[1])["engine"]["restarts"]
        later, deadline = first, time.time() + 30
        while time.time() < deadline and later <= first:
            later = json.loads(gw.request("GET", "/v1/stats", timeout=5)[1])["engine"]["restarts"]
            time.sleep(0.2)
        report("... and it never gives up: the next attempt comes", later > first, (first, later))
    finally:
        gw.stop()

    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
