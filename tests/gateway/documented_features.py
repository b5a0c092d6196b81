"""Black-box tests of what docs/gateway.md promises and no other suite exercised (issue 19
item 6), against build/inkling-gateway in front of the scripted engine
tests/gateway/fake_engine.py: it records every SUBMIT it is sent, replies with chosen tokens,
holds a request until SIGUSR1 or dies after ACCEPT, so each case is exact and no check
depends on timing. tests/gateway/documented_model_features.py has the cases that need a
real model.

    python3 tests/gateway/documented_features.py BUILD

Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only.
"""
import base64
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
AUDIO = os.path.join(ROOT, "tests", "fixtures", "audio")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway, read_all, read_until  # noqa: E402
from lib.scrape import histogram_moves, prometheus, sse_events  # noqa: E402

checks = Checks("gateway documented features")
report = checks.report
SCRATCH = tempfile.mkdtemp(prefix="inkling-gw-doc-")
DEADLINE = 30  # seconds any awaited state may take before the check fails


def start(*fake_args, extra=(), model_id="fake", env=None, wait=True, key=None):
    """A gateway in front of the fake engine; `fake_args` go to the engine."""
    argv = [os.path.join(BUILD, "inkling-gateway"), "--model", ROOT, "--engine", FAKE]
    if model_id:
        argv += ["--model-id", model_id]
    argv += [f"--engine-arg={a}" for a in fake_args] + list(extra)
    # A key in the caller's environment would change every case; `env` adds to the rest.
    environment = {k: v for k, v in os.environ.items() if k != "INKLING_API_KEY"}
    environment.update(env or {})
    return Gateway(argv, key=key, wait=wait, env=environment)


def recorder():
    """A fresh file for --fake-record, and a reader of the SUBMITs it holds."""
    fd, path = tempfile.mkstemp(prefix="submits-", suffix=".jsonl", dir=SCRATCH)
    os.close(fd)

    def submits():
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    return path, submits


def reply_file(tokens):
    """A file for --fake-reply: the tokens the fake engine answers every SUBMIT with."""
    fd, path = tempfile.mkstemp(prefix="reply-", suffix=".json", dir=SCRATCH)
    with os.fdopen(fd, "w") as f:
        json.dump(tokens, f)
    return path


def call(g, method, path, body=None, headers=None, key=None, timeout=DEADLINE):
    """One request with exactly these headers (plus Host and, for a body, Content-Type):
    (status, body bytes, headers with lower-case names). A timeout is status "timeout"."""
    c = http.client.HTTPConnection("127.0.0.1", g.port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"} if body is not None else {}
        if key:
            h["Authorization"] = "Bearer " + key
        h.update(headers or {})
        c.request(method, path, body=json.dumps(body) if isinstance(body, dict) else body, headers=h)
        r = c.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    except OSError as e:
        return "timeout", str(e).encode(), {}
    finally:
        c.close()


def chat_body(content="hi", model="fake", **kw):
    body = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    body.update(kw)
    return body


def error_code(body):
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def open_stream(g, content="hold", key=None, headers="", first=b"ok"):
    """A streaming chat on a raw socket, read up to its first token `first` (the fake's first
    DATA; the role chunk before it has an empty content)."""
    s = socket.create_connection(("127.0.0.1", g.port), timeout=DEADLINE)
    body = json.dumps(chat_body(content, stream=True))
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\nContent-Type: application/json\r\n"
               f"{auth}{headers}Content-Length: {len(body)}\r\n\r\n{body}").encode())
    return s, read_until(s, b'"content":"' + first + b'"', timeout=DEADLINE)


def send_request(g, body, path="/v1/chat/completions"):
    """A request written on a raw socket and not read (it waits in the gateway's queue)."""
    s = socket.create_connection(("127.0.0.1", g.port), timeout=DEADLINE)
    data = json.dumps(body)
    s.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(data)}\r\n\r\n{data}").encode())
    return s


def gateway_stats(g, key=None):
    st, body, _ = call(g, "GET", "/v1/stats", key=key)
    return json.loads(body)["gateway"] if st == 200 else {}


def wait_for(predicate, seconds=DEADLINE):
    """Polls `predicate` until it returns something true or `seconds` pass; its last value."""
    deadline = time.time() + seconds
    value = predicate()
    while not value and time.time() < deadline:
        time.sleep(0.05)
        value = predicate()
    return value


def engine_pid(g, key=None):
    return json.loads(call(g, "GET", "/v1/stats", key=key)[1])["engine"]["pid"]


def metrics(g, key=None):
    return prometheus(call(g, "GET", "/metrics", key=key)[1].decode())


# ---------------------------------------------------------------------------------- CORS


def cors():
    """--cors-origin: preflight, allowed and refused origins, the headers a browser needs."""
    key = "cors-key"
    g = start(extra=["--cors-origin", "https://app.example", "--api-key", key], key=key)
    try:
        app, evil = {"Origin": "https://app.example"}, {"Origin": "https://evil.example"}
        pre = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
        st, _, h = call(g, "OPTIONS", "/v1/chat/completions", headers={**app, **pre})
        methods = [m.strip() for m in h.get("access-control-allow-methods", "").split(",")]
        allowed = [x.strip().lower() for x in h.get("access-control-allow-headers", "").split(",")]
        report("a preflight from a --cors-origin origin: 204 without the key, Allow-Origin that origin, POST and "
               "Authorization/Content-Type allowed, Max-Age, Vary: Origin",
               st == 204 and h.get("access-control-allow-origin") == "https://app.example" and "POST" in methods
               and {"authorization", "content-type", "x-api-key"} <= set(allowed)
               and h.get("access-control-max-age") == "600" and h.get("vary") == "Origin", (st, h))
        # What openai-node and @anthropic-ai/sdk send from a browser (dangerouslyAllowBrowser; the
        # names grepped from tests/gateway/node_modules): every one must be allowed, or the
        # browser refuses the request. cors_preflight.test.mjs checks the SDKs' real requests.
        sdk = ["authorization", "content-type", "accept", "x-api-key", "anthropic-version", "anthropic-beta",
               "anthropic-dangerous-direct-browser-access", "openai-organization", "openai-project",
               "x-stainless-lang", "x-stainless-package-version", "x-stainless-os", "x-stainless-arch",
               "x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-retry-count",
               "x-stainless-timeout", "x-stainless-helper-method", "x-stainless-helper", "x-stainless-poll-helper"]
        st, _, h = call(g, "OPTIONS", "/v1/messages",
                        headers={**app, "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": ", ".join(sdk + ["x-not-an-sdk-header"])})
        allowed = [x.strip().lower() for x in h.get("access-control-allow-headers", "").split(",")]
        report("a preflight allows every request header the official SDKs send from a browser (anthropic-*, "
               "x-stainless-*, openai-*, x-api-key), and no other asked-for header",
               st == 204 and set(sdk) <= set(allowed) and "x-not-an-sdk-header" not in allowed,
               (st, sorted(set(sdk) - set(allowed)), h))
        st, _, h = call(g, "OPTIONS", "/v1/chat/completions", headers={**evil, **pre})
        report("a preflight from another origin gets no Access-Control-Allow-Origin (the browser refuses)",
               "access-control-allow-origin" not in h, (st, h))
        st, body, h = call(g, "POST", "/v1/chat/completions", chat_body(), headers=app, key=key)
        report("a POST from the allowed origin: 200 with Allow-Origin, Vary and x-request-id exposed",
               st == 200 and h.get("access-control-allow-origin") == "https://app.example" and h.get("vary") == "Origin"
               and "x-request-id" in h.get("access-control-expose-headers", "")
               and "Retry-After" in h.get("access-control-expose-headers", ""), (st, body[:200], h))
        s, head = open_stream(g, key=key, headers="Origin: https://app.example\r\n")
        s.close()
        report("... and a streamed answer carries Allow-Origin in its SSE head",
               head.startswith(b"HTTP/1.1 200") and b"Access-Control-Allow-Origin: https://app.example\r\n" in head,
               head[:400])
        st, body, h = call(g, "POST", "/v1/chat/completions", chat_body(), headers=app)
        report("an error (401, no key) to the allowed origin carries Allow-Origin, so the page can read it",
               st == 401 and h.get("access-control-allow-origin") == "https://app.example", (st, h))
        st, body, h = call(g, "POST", "/v1/chat/completions", chat_body(), headers=evil, key=key)
        report("a POST from another origin: 403 origin_not_allowed without Allow-Origin",
               st == 403 and error_code(body) == "origin_not_allowed" and "access-control-allow-origin" not in h,
               (st, body[:200], h))
        own = {"Origin": f"http://localhost:{g.port}"}
        st, body, h = call(g, "POST", "/v1/chat/completions", chat_body(), headers=own, key=key)
        report("the default origins stay allowed beside --cors-origin (http://localhost:PORT, Host 127.0.0.1)",
               st == 200 and h.get("access-control-allow-origin") == own["Origin"], (st, body[:200], h))
        st, body, _ = call(g, "POST", "/v1/chat/completions", chat_body(),
                           headers={"Origin": f"http://localhost:{g.port + 1}"}, key=key)
        report("... but only on the gateway's own port", st == 403, (st, body[:200]))
    finally:
        g.stop()
    g = start(extra=["--cors-origin", "*"])
    try:
        st, body, h = call(g, "POST", "/v1/chat/completions", chat_body(), headers={"Origin": "https://any.example"})
        report("--cors-origin '*': any origin may POST, Allow-Origin echoes it",
               st == 200 and h.get("access-control-allow-origin") == "https://any.example", (st, body[:200], h))
    finally:
        g.stop()


# --------------------------------------------------------------- Host guard and binding


def allowed_host():
    """--allowed-host adds Host names to the loopback ones; '*' turns the guard off."""
    g = start()
    try:
        st, _, _ = call(g, "GET", "/v1/models", headers={"Host": f"inkling.lan:{g.port}"})
        report("without --allowed-host a Host of another name is 403", st == 403, st)
    finally:
        g.stop()
    g = start(extra=["--allowed-host", "inkling.lan"])
    try:
        name = f"inkling.lan:{g.port}"
        got = {h: call(g, "GET", "/v1/models", headers={"Host": h})[0]
               for h in (name, "inkling.lan", f"other.lan:{g.port}", f"127.0.0.1:{g.port}", f"localhost:{g.port}")}
        report("--allowed-host inkling.lan: that name (with or without the port) and the loopback names pass, "
               "another name is 403", got == {name: 200, "inkling.lan": 200, f"other.lan:{g.port}": 403,
                                               f"127.0.0.1:{g.port}": 200, f"localhost:{g.port}": 200}, got)
        st, body, _ = call(g, "POST", "/v1/chat/completions", chat_body(),
                           headers={"Host": name, "Origin": f"http://{name}"})
        report("the web UI served under that name may POST (same origin as the Host header)", st == 200,
               (st, body[:200]))
    finally:
        g.stop()
    g = start(extra=["--allowed-host", "*"])
    try:
        st, _, _ = call(g, "GET", "/v1/models", headers={"Host": "whatever.example"})
        report("--allowed-host '*' accepts any Host", st == 200, st)
    finally:
        g.stop()


def listening_on_any(port):
    """True when /proc/net/tcp (IPv4) has a listening socket on 0.0.0.0:port."""
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return any(r[1] == f"00000000:{port:04X}" and r[3] == "0A" for r in rows)


def insecure_bind():
    """--allow-insecure-bind: a non-loopback --host without a key starts; INKLING_API_KEY
    counts as a key for the guard."""
    g = start(extra=["--host", "0.0.0.0", "--allow-insecure-bind"])
    try:
        st, _, _ = call(g, "GET", "/v1/models")
        report("--host 0.0.0.0 --allow-insecure-bind: listening on every address, /v1/* open without a key",
               listening_on_any(g.port) and st == 200, (listening_on_any(g.port), st, g.log_tail(300)))
    finally:
        g.stop()
    g = start(extra=["--host", "0.0.0.0"], env={"INKLING_API_KEY": "env-key"})
    try:
        got = (call(g, "GET", "/v1/models")[0], call(g, "GET", "/v1/models", key="env-key")[0])
        report("--host 0.0.0.0 with INKLING_API_KEY (no flag) starts, and the key is required",
               listening_on_any(g.port) and got == (401, 200), got)
    finally:
        g.stop()


def api_key_env():
    """INKLING_API_KEY gives the key and keeps it out of the process list; the flag wins."""
    key = "k-" + base64.b16encode(os.urandom(8)).decode()
    g = start(env={"INKLING_API_KEY": key})
    try:
        got = {"none": call(g, "GET", "/v1/models")[0], "bearer": call(g, "GET", "/v1/models", key=key)[0],
               "x-api-key": call(g, "GET", "/v1/models", headers={"x-api-key": key})[0],
               "metrics": call(g, "GET", "/metrics")[0]}
        with open(f"/proc/{g.proc.pid}/cmdline", "rb") as f:
            cmdline = f.read()
        report("INKLING_API_KEY: 401 without it (/metrics too), 200 with it as Bearer or x-api-key",
               got == {"none": 401, "bearer": 200, "x-api-key": 200, "metrics": 401}, got)
        report("... and the key is not in the gateway's command line", key.encode() not in cmdline, cmdline)
    finally:
        g.stop()
    g = start(extra=["--api-key", "flag-key"], env={"INKLING_API_KEY": "env-key"})
    try:
        got = (call(g, "GET", "/v1/models", key="flag-key")[0], call(g, "GET", "/v1/models", key="env-key")[0])
        report("--api-key wins over INKLING_API_KEY", got == (200, 401), got)
    finally:
        g.stop()


# ------------------------------------------------------------------- models and fields


def model_id():
    """--model-id names the model in /v1/models, /v1/models/{id}, requests and answers."""
    g = start(model_id="my-model")
    try:
        st, body, _ = call(g, "GET", "/v1/models")
        listed = [m.get("id") for m in json.loads(body).get("data", [])] if st == 200 else body
        report("--model-id my-model: /v1/models lists exactly that id", listed == ["my-model"], listed)
        st, body, _ = call(g, "GET", "/v1/models/my-model")
        one = json.loads(body) if st == 200 else body
        report("GET /v1/models/my-model: 200, the model object",
               st == 200 and one.get("id") == "my-model" and one.get("object") == "model", (st, one))
        st, body, _ = call(g, "GET", "/v1/models/other-model")
        e = json.loads(body).get("error", {}) if st == 404 else {}
        report("GET /v1/models/{unknown}: 404 model_not_found naming it",
               e.get("code") == "model_not_found" and "other-model" in e.get("message", "")
               and e.get("param") == "model",
               (st, body[:200]))
        st, body, _ = call(g, "POST", "/v1/chat/completions", chat_body(model="my-model"))
        report("a chat naming my-model is served and its answer names my-model",
               st == 200 and json.loads(body).get("model") == "my-model", (st, body[:200]))
        st, body, _ = call(g, "POST", "/v1/chat/completions", chat_body(model=os.path.basename(ROOT)))
        report("... the directory's name is no longer the model's: 404 model_not_found",
               st == 404 and error_code(body) == "model_not_found", (st, body[:200]))
    finally:
        g.stop()
    g = start(model_id=None)
    try:
        name = os.path.basename(ROOT)
        st, body, _ = call(g, "GET", "/v1/models")
        listed = [m.get("id") for m in json.loads(body).get("data", [])] if st == 200 else body
        report("without --model-id the model is the directory's name (/v1/models, /v1/models/{id})",
               listed == [name] and call(g, "GET", f"/v1/models/{name}")[0] == 200, (name, listed))
    finally:
        g.stop()


def cache_slot():
    """cache_slot picks the engine slot, and must be below --slots."""
    path, submits = recorder()
    g = start("--fake-record", path, extra=["--slots", "4"])
    try:
        statuses = [call(g, "POST", "/v1/chat/completions", chat_body(f"turn {s}", cache_slot=s))[0] for s in (2, 3, 0)]
        slots = [s["slot"] for s in submits()]
        report("cache_slot 2, 3, 0 are submitted to engine slots 2, 3, 0", statuses == [200] * 3 and slots == [2, 3, 0],
               (statuses, slots))
        st, body, _ = call(g, "POST", "/v1/chat/completions", chat_body(cache_slot=4))
        e = json.loads(body).get("error", {})
        report("cache_slot 4 with --slots 4: 400 naming cache_slot, nothing submitted",
               st == 400 and e.get("param") == "cache_slot" and "below 4" in e.get("message", "")
               and len(submits()) == 3,
               (st, body[:200], len(submits())))
        got = {repr(v): call(g, "POST", "/v1/chat/completions", chat_body(cache_slot=v)) for v in (-1, "1", 1.5)}
        report("cache_slot -1, \"1\" and 1.5 are 400s naming cache_slot (an integer in 0..65535)",
               all(st == 400 and json.loads(b)["error"]["param"] == "cache_slot" for st, b, _ in got.values())
               and len(submits()) == 3, {k: (v[0], v[1][:120]) for k, v in got.items()})
    finally:
        g.stop()


# The TMLv0 markers (protocol/PROTOCOL.md §12.1), spelled out here as the oracle.
SYS, USER, MODEL, TOOL = "<|message_system|>", "<|message_user|>", "<|message_model|>", "<|message_tool|>"
TEXT, END, END_SAMPLING = "<|content_text|>", "<|end_message|>", "<|content_model_end_sampling|>"


def effort_line(x):
    return f"{SYS}{TEXT}Thinking effort level: {x}{END}"


def roles():
    """The developer and tool roles render as PROTOCOL.md §12.1 says: developer as system
    (before the effort line), tool with its name."""
    path, submits = recorder()
    g = start("--fake-record", path)
    try:
        messages = [{"role": "developer", "content": "Answer in digits."},
                    {"role": "user", "content": "What is 2+2?"},
                    {"role": "assistant", "content": "Let me compute."},
                    {"role": "tool", "name": "calc", "tool_call_id": "call_1", "content": "4"},
                    {"role": "user", "content": "So?"}]
        st, body, _ = call(g, "POST", "/v1/chat/completions", {"model": "fake", "max_tokens": 4, "messages": messages})
        want = (f"{SYS}{TEXT}Answer in digits.{END}" + effort_line(0) + f"{USER}{TEXT}What is 2+2?{END}"
                f"{MODEL}{TEXT}Let me compute.{END}{END_SAMPLING}{TOOL}calc{TEXT}4{END}"
                f"{USER}{TEXT}So?{END}{MODEL}{TEXT}")
        got = submits()[-1]["prompt"] if st == 200 and submits() else None
        report("developer and tool messages: the engine gets the TMLv0 prompt of PROTOCOL.md §12.1", got == want,
               (st, body[:200], got, want))
        sys_messages = [dict(messages[0], role="system")] + messages[1:]
        st, _, _ = call(g, "POST", "/v1/chat/completions", {"model": "fake", "max_tokens": 4, "messages": sys_messages})
        report("... developer renders exactly as system", st == 200 and submits()[-1]["prompt"] == want,
               submits()[-1]["prompt"])
    finally:
        g.stop()


def reasoning():
    """reasoning_effort → the effort line and an open model turn; what the model writes after
    <|content_thinking|> arrives as reasoning_content, after <|content_text|> as content."""
    reply = ["<|content_thinking|>", "Two and two", " make four.", "<|content_text|>", "It is ", "4.", END]
    path, submits = recorder()
    g = start("--fake-record", path, "--fake-reply", reply_file(reply))
    try:
        st, body, _ = call(g, "POST", "/v1/chat/completions", chat_body("2+2?", reasoning_effort="high"))
        msg = json.loads(body)["choices"][0]["message"] if st == 200 else body
        prompt = submits()[-1]["prompt"]
        report("reasoning_effort high: the prompt has 'Thinking effort level: 0.9' and ends with an open model turn",
               effort_line(0.9) in prompt and prompt.endswith(f"{END}{MODEL}"), prompt)
        report("... the thinking tokens come back as message.reasoning_content, the answer as content, markers dropped",
               isinstance(msg, dict) and msg.get("reasoning_content") == "Two and two make four."
               and msg.get("content") == "It is 4.", msg)
        s = send_request(g, chat_body("2+2?", reasoning_effort="high", stream=True))
        events = sse_events(read_all(s, timeout=DEADLINE))
        s.close()
        deltas = [e["choices"][0]["delta"] for e in events if isinstance(e, dict) and e.get("choices")]
        kinds = [k for d in deltas for k in d if k in ("reasoning_content", "content") and d[k]]
        streamed = {k: "".join(d.get(k, "") for d in deltas) for k in ("reasoning_content", "content")}
        report("... streamed: reasoning_content deltas, then content deltas, the same texts, then [DONE]",
               streamed == {"reasoning_content": "Two and two make four.", "content": "It is 4."}
               and kinds == sorted(kinds, key=lambda k: k != "reasoning_content") and events[-1:] == ["[DONE]"],
               (streamed, kinds, events[-2:]))
        levels = {"minimal": "0.1", "low": "0.2", "medium": "0.7", "high": "0.9", "xhigh": "0.99"}
        seen = {}
        for level, x in levels.items():
            call(g, "POST", "/v1/chat/completions", chat_body("2+2?", reasoning_effort=level))
            seen[level] = effort_line(x) in submits()[-1]["prompt"]
        report("each reasoning_effort level writes its effort (minimal 0.1 … xhigh 0.99)", all(seen.values()), seen)
    finally:
        g.stop()
    path, submits = recorder()
    g = start("--fake-record", path, "--fake-reply", reply_file(["It is ", "4."]))
    try:
        st, body, _ = call(g, "POST", "/v1/chat/completions", chat_body("2+2?", reasoning_effort="none"))
        msg = json.loads(body)["choices"][0]["message"] if st == 200 else body
        prompt = submits()[-1]["prompt"]
        report("reasoning_effort none: effort 0, the prompt opens the answer (<|content_text|>), all output is content",
               effort_line(0) in prompt and prompt.endswith(f"{MODEL}{TEXT}") and isinstance(msg, dict)
               and msg.get("content") == "It is 4." and "reasoning_content" not in msg, (prompt[-80:], msg))
    finally:
        g.stop()


def frames_of_dmel(path):
    with open(path, "rb") as f:
        return f.read()


def dmel_boost():
    """--dmel-boost off: the engine gets the DMel bytes of the reference without the quiet
    clip's RMS boost (tests/fixtures/audio: numpy goldens, with and without)."""
    wav = base64.b64encode(open(os.path.join(AUDIO, "speech_16k_quiet_s16.wav"), "rb").read()).decode()
    body = {"model": "fake", "max_tokens": 2, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is said?"},
        {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}}]}]}
    got = {}
    for mode, golden in (("on", "speech_16k_quiet_s16.dmel"), ("off", "speech_16k_quiet_s16_noboost.dmel")):
        path, submits = recorder()
        g = start("--fake-record", path, extra=["--dmel-boost", mode])
        try:
            st, resp, _ = call(g, "POST", "/v1/chat/completions", body)
            sent = submits()[-1] if st == 200 and submits() else {}
            ext = base64.b64decode(sent.get("ext", ""))
            want = frames_of_dmel(os.path.join(AUDIO, golden))
            got[mode] = ext
            report(f"--dmel-boost {mode}: the engine gets the reference's DMel bytes ({golden}) and one "
                   "<|audio|> per frame",
                   ext == want and sent.get("prompt", "").count("<|audio|>") == len(want) // 80,
                   (st, resp[:200], len(ext), len(want), ext[:16], want[:16]))
        finally:
            g.stop()
    report("... and the boost changes the bytes of that quiet clip", got.get("on") != got.get("off"), "")


# ------------------------------------------------------------------------ admission


def queue_timeout():
    """--queue-timeout: a request that waits that long for a slot is a 429 queue_timeout."""
    path, submits = recorder()
    g = start("--fake-hold", "--fake-record", path, extra=["--slots", "1", "--queue-timeout", "1"])
    try:
        s, _ = open_stream(g)
        t0 = time.monotonic()
        st, body, h = call(g, "POST", "/v1/chat/completions", chat_body("second"), timeout=20)
        waited = time.monotonic() - t0
        report(f"--queue-timeout 1: with the one slot held, the next request is 429 queue_timeout with Retry-After "
               f"(after {waited:.1f} s)", st == 429 and error_code(body) == "queue_timeout" and "retry-after" in h,
               (st, body[:200], h))
        report("... it left the queue and never reached the engine",
               gateway_stats(g).get("queued") == 0 and len(submits()) == 1, (gateway_stats(g), len(submits())))
        s.close()
    finally:
        g.stop()


def hangup_while_queued():
    """A client that hangs up while queued leaves the queue: it is counted as a cancel and is
    never submitted when the slot frees."""
    path, submits = recorder()
    g = start("--fake-hold", "--fake-record", path, "--fake-reply", reply_file(["a", "b"]), extra=["--slots", "1"])
    try:
        held, _ = open_stream(g, "first", first=b"a")
        queued = send_request(g, chat_body("queued one"))
        in_queue = wait_for(lambda: gateway_stats(g).get("queued") == 1)
        queued.close()
        left = wait_for(lambda: gateway_stats(g).get("queued") == 0)
        cancels = metrics(g).get(("inkling_client_cancels_total", ()))
        report("a queued client that hangs up leaves the queue (queued 1 → 0) and counts as a cancel",
               in_queue and left and cancels == 1, (in_queue, left, cancels, gateway_stats(g)))
        os.kill(engine_pid(g), signal.SIGUSR1)  # the held request finishes; its slot frees
        rest = read_all(held, timeout=DEADLINE)
        held.close()
        after, head = open_stream(g, "after", first=b"a")  # held too: its first token shows it has the slot
        after.close()
        prompts = [x["prompt"] for x in submits()]
        report("... the slot goes to the next request; the engine never saw the one that hung up",
               rest.rstrip().endswith(b"data: [DONE]") and b'"content":"a"' in head and len(prompts) == 2
               and "first" in prompts[0] and "after" in prompts[1], (rest[-120:], head[-120:], prompts))
    finally:
        g.stop()


def died_after_accept():
    """A non-streaming request whose engine dies after ACCEPT is a 503 with Retry-After (never
    resubmitted: its output may already have been generated)."""
    path, submits = recorder()
    g = start("--fake-exit-after-accept", "3", "--fake-record", path)
    try:
        st, body, h = call(g, "POST", "/v1/chat/completions", chat_body("doomed"))
        e = json.loads(body).get("error", {}) if st == 503 else {}
        report("engine dies after ACCEPT (non-streaming): 503 engine_error with Retry-After, an OpenAI error object",
               st == 503 and e.get("code") == "engine_error" and int(h.get("retry-after", "0")) >= 1
               and set(e) == {"message", "type", "param", "code"}, (st, body[:300], h))
        retried = metrics(g).get(("inkling_requests_retried_total", ()))
        report("... submitted once, not retried", len(submits()) == 1 and retried == 0, (len(submits()), retried))
        back = wait_for(lambda: call(g, "GET", "/health")[0] == 200)
        report("... and a new engine serves afterwards (/health 200 again)", back, call(g, "GET", "/health")[:2])
    finally:
        g.stop()


def connection_cap():
    """--max-connections (64): past it a new connection gets 429 too_many_connections and
    is closed at once, never queued; a freed place is usable again."""
    for cap, flag in ((64, []), (3, ["--max-connections", "3"])):
        name = "the default 64" if not flag else "--max-connections 3"
        g = start(extra=["--max-connections-per-address", "1000"] + flag)
        held = []
        try:
            held = [socket.create_connection(("127.0.0.1", g.port), timeout=DEADLINE) for _ in range(cap)]
            # Connections are accepted in order: once the last one is served, all are counted.
            last = held[-1]
            last.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\n\r\n".encode())
            served = read_until(last, b'"ok"}', timeout=DEADLINE)
            extra = socket.create_connection(("127.0.0.1", g.port), timeout=DEADLINE)
            refused = read_all(extra, timeout=DEADLINE)  # returns when the gateway closes it
            extra.close()
            report(f"{name}: with {cap} connections open the next one gets 429 too_many_connections, "
                   "Retry-After: 1, and is closed", served.startswith(b"HTTP/1.1 200")
                   and refused.startswith(b"HTTP/1.1 429") and b"Retry-After: 1\r\n" in refused
                   and b"too_many_connections" in refused, (served[:60], refused[:300]))
            last.sendall(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\n\r\n".encode())
            text = read_until(last, b"inkling_requests_active", timeout=DEADLINE).decode(errors="replace")
            counted = text.count('inkling_requests_total{endpoint="other",status="429"} 1\n')
            report("... counted in /metrics as a 429", counted == 1, text[-600:])
            held.pop(0).close()

            def admitted():
                s = socket.create_connection(("127.0.0.1", g.port), timeout=DEADLINE)
                s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\nConnection: close\r\n\r\n".encode())
                answer = read_all(s, timeout=DEADLINE)
                s.close()
                return answer.startswith(b"HTTP/1.1 200")
            report("... once one closes, a new connection is served", wait_for(admitted), "")
        finally:
            for s in held:
                s.close()
            g.stop()


# -------------------------------------------------------------------- shutdown


def sigint_drains():
    """SIGINT: /health says draining (503), no new connection is accepted, the request in
    flight finishes, then the gateway exits 0 and its engine is gone."""
    g = start("--fake-hold", "--fake-reply", reply_file(["one", " two", " three"]))
    try:
        pid = engine_pid(g)
        monitor = http.client.HTTPConnection("127.0.0.1", g.port, timeout=DEADLINE)  # a kept-alive connection
        monitor.request("GET", "/health")
        first = monitor.getresponse()
        first.read()
        stream, _ = open_stream(g, "drain me", first=b"one")
        g.proc.send_signal(signal.SIGINT)

        def draining():
            monitor.request("GET", "/health")
            r = monitor.getresponse()
            body = r.read()
            return (r.status, json.loads(body).get("status"), r.getheader("Retry-After")) \
                if b"draining" in body else None
        seen = wait_for(draining)
        report("after SIGINT, /health (on an open connection) is 503 'draining' with Retry-After",
               first.status == 200 and seen and seen[0] == 503 and seen[1] == "draining" and int(seen[2] or 0) >= 1,
               (first.status, seen, g.log_tail(400)))
        try:
            socket.create_connection(("127.0.0.1", g.port), timeout=5).close()
            refused = False
        except OSError:
            refused = True
        report("... and new connections are refused", refused, "")
        os.kill(pid, signal.SIGUSR1)  # the engine finishes the held request
        rest = read_all(stream, timeout=DEADLINE).decode(errors="replace")
        stream.close()
        monitor.close()
        try:
            code = g.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            code = None
        texts = "".join(e["choices"][0]["delta"].get("content", "") for e in sse_events(rest)
                        if isinstance(e, dict) and e.get("choices"))
        report("... the stream in flight finishes whole (no error event), then the gateway exits 0",
               texts == " two three" and rest.rstrip().endswith("data: [DONE]") and '"error"' not in rest and code == 0,
               (code, texts, rest[-300:]))
        report("... and its engine has exited", wait_for(lambda: gone(pid)), pid)
    finally:
        g.stop()


def gone(pid):
    """The process has exited: no /proc entry, or a zombie (state Z) nobody reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# ---------------------------------------------------------------------- metrics


HISTOGRAMS = ("inkling_time_to_first_token_seconds", "inkling_inter_token_seconds",
              "inkling_request_duration_seconds", "inkling_queue_wait_seconds")


def histogram_checks(before, after, expected_counts, walls, label):
    for name in HISTOGRAMS:
        timed = name in ("inkling_time_to_first_token_seconds", "inkling_request_duration_seconds")
        problems = histogram_moves(before, after, name, expected_counts[name], walls if timed else None)
        report(f"{label}: {name} moved by {expected_counts[name]} observations, consistently", not problems, problems)


def metrics_histograms():
    """The /metrics histograms count what the requests did: one TTFT, one duration and one
    queue wait per request, an inter-token gap per token after the first."""
    reply = ["a", "b", "c", "d", "e"]
    g = start("--fake-reply", reply_file(reply))
    try:
        before = metrics(g)
        walls, statuses = [], []
        for i in range(4):
            t0 = time.monotonic()
            if i % 2:
                s = send_request(g, chat_body(f"stream {i}", stream=True))
                raw = read_all(s, timeout=DEADLINE)
                s.close()
                statuses.append(200 if raw.rstrip().endswith(b"data: [DONE]") else raw[:100])
            else:
                statuses.append(call(g, "POST", "/v1/chat/completions", chat_body(f"json {i}"))[0])
            walls.append(time.monotonic() - t0)
        after = metrics(g)
        report("four requests (two streamed) answered", statuses == [200] * 4, statuses)
        n = len(walls)
        histogram_checks(before, after, {"inkling_time_to_first_token_seconds": n,
                                         "inkling_inter_token_seconds": n * (len(reply) - 1),
                                         "inkling_request_duration_seconds": n, "inkling_queue_wait_seconds": n},
                         walls, "fake engine, 5 tokens each")
        key = ("inkling_requests_total", (("endpoint", "chat"), ("status", "200")))
        out = ("inkling_completion_tokens_total", ())
        report("... requests_total{chat,200} +4 and completion tokens +20",
               after.get(key, 0) - before.get(key, 0) == 4 and after.get(out, 0) - before.get(out, 0) == 20,
               (before.get(key), after.get(key), before.get(out), after.get(out)))
    finally:
        g.stop()


def main():
    try:
        for scenario in (cors, allowed_host, insecure_bind, api_key_env, model_id, cache_slot, roles, reasoning,
                         dmel_boost, queue_timeout, hangup_while_queued, died_after_accept, connection_cap,
                         sigint_drains, metrics_histograms):
            try:
                scenario()
            except Exception as e:  # noqa: BLE001 — a group that breaks is its FAIL line; the next one runs
                report(f"{scenario.__name__} ran to its end", False, f"{type(e).__name__}: {e}")
    finally:
        for f in os.listdir(SCRATCH):
            os.unlink(os.path.join(SCRATCH, f))
        os.rmdir(SCRATCH)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
