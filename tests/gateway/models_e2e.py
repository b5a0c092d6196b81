"""Several models behind one gateway (#17 item 1), end to end against build/inkling-gateway and
real engines: models/inkling-demo served under several names with different engine settings.

1. Three models loaded at start: `a` (2 slots), `b` (1 slot), `broken` (an engine argument the
   engine refuses, so it never starts): /v1/models lists them in order, each request goes to
   its model's engine (the model's own counters and engine STATS move, no other's), an
   unknown model is 404 model_not_found (OpenAI's shape, and the Anthropic one on
   /v1/messages), /health is 503 while a model is failed but /health/a and /health/b are 200,
   /metrics and /v1/stats are per model.
2. On demand, under a memory budget that holds one model, with an idle timeout: nothing runs at
   start (/health 200, both unloaded); a first request loads its model and waits for it; two
   requests at once for an unloaded model load it once; a request for the other model unloads
   the idle one to make room; an idle model is stopped after the timeout (its engine process
   gone) and its next request loads it again.
3. The budget while the resident model is busy (the scripted engine, tests/gateway/fake_engine.py,
   holds its request): a request for the other waits, then loads it once the busy one is idle;
   with a short --model-load-wait it fails with 503 model_unavailable instead.

    python3 tests/gateway/models_e2e.py BUILD

Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only. Nothing
waits on a timer: every wait polls an observable state under a deadline that fails the check.
"""
import json
import os
import signal
import sys
import threading
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "models", "inkling-demo")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway  # noqa: E402
from lib.scrape import prometheus  # noqa: E402

checks = Checks("gateway models e2e")
report = checks.report
DEADLINE = 60
COMMON = ["--ctx", "512", "--threads", "1", "--slots", "2"]


def gateway(*args, wait=True):
    return Gateway([os.path.join(BUILD, "inkling-gateway"), *COMMON, *args], wait=wait)


def chat(g, model, text="Tell me a story.", path="/v1/chat/completions", headers=None):
    if path == "/v1/messages":
        body = {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": text}]}
    else:
        body = {"model": model, "max_tokens": 4, "temperature": 0, "messages": [{"role": "user", "content": text}]}
    st, resp, h = g.request("POST", path, body, headers=headers, timeout=DEADLINE)
    return st, json.loads(resp), h


def get(g, path):
    st, body, h = g.request("GET", path, timeout=DEADLINE)
    return st, (json.loads(body) if body.startswith(b"{") else body.decode())


def until(what, probe, deadline=DEADLINE):
    """Polls probe() until it returns a true value (returned) or the deadline passes (None)."""
    end = time.time() + deadline
    while time.time() < end:
        v = probe()
        if v:
            return v
        time.sleep(0.05)
    print(f"(gave up waiting for {what} after {deadline} s)", flush=True)
    return None


def status(g, path):
    """The status of GET path, or None while the gateway is not listening yet."""
    try:
        return g.request("GET", path, timeout=5)[0]
    except OSError:
        return None


def metric(g, name, model):
    return prometheus(get(g, "/metrics")[1]).get((name, (("model", model),)))


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def loaded_at_start():
    g = gateway("--model", f"a={DEMO}", "--model", f"b={DEMO}", "--model", f"broken={DEMO}",
                "--model-slots", "b=1", "--model-engine-arg", "broken=--no-such-flag", wait=False)
    try:
        ready = until("/health/a and /health/b 200",
                      lambda: status(g, "/health/a") == 200 and status(g, "/health/b") == 200)
        report("three models: a and b become ready on their own while broken's engine cannot start", ready,
               g.log_tail())
        if not ready:
            return
        st, models = get(g, "/v1/models")
        report("/v1/models lists every model, in the order given",
               st == 200 and [m["id"] for m in models["data"]] == ["a", "b", "broken"], models)
        st, one = get(g, "/v1/models/b")
        st404, missing = get(g, "/v1/models/nope")
        report("/v1/models/b is b; /v1/models/nope is 404 model_not_found",
               st == 200 and one["id"] == "b" and st404 == 404 and missing["error"]["code"] == "model_not_found",
               (one, missing))

        st, stats0 = get(g, "/v1/stats")
        report("/v1/stats: each model's own slots (b's --model-slots) and engine",
               stats0["models"]["a"]["slots"] == 2 and stats0["models"]["b"]["slots"] == 1
               and stats0["models"]["b"]["engine"]["info"].get("slots") == 1
               and stats0["models"]["a"]["engine"]["info"].get("slots") == 2
               and stats0["models"]["a"]["engine"]["pid"] != stats0["models"]["b"]["engine"]["pid"], stats0["models"])
        sa, ra, _ = chat(g, "a")
        sb, rb, _ = chat(g, "b")
        report("a request names its model and is answered by it", sa == 200 and sb == 200
               and ra["model"] == "a" and rb["model"] == "b", (ra, rb))
        # Completions too (its own body shape).
        st, rc, _ = g.request("POST", "/v1/completions", {"model": "b", "prompt": "1 2 3", "max_tokens": 3},
                              timeout=DEADLINE)
        rc = json.loads(rc)
        report("/v1/completions routes by model as well", st == 200 and rc["model"] == "b", rc)

        def done(stats, m):
            return stats["models"][m]["engine"]["stats"].get("requests_done")
        stats1 = until("both engines' STATS to count the requests",
                       lambda: (lambda s: s if done(s, "a") == 1 and done(s, "b") == 2 else None)(get(g, "/v1/stats")[1]))
        report("each model's engine did its own requests: a 1, b 2 (STATS requests_done)", stats1,
               get(g, "/v1/stats")[1]["models"])
        if stats1:
            report("... and the gateway's per-model counters agree",
                   stats1["models"]["a"]["requests"] == 1 and stats1["models"]["b"]["requests"] == 2
                   and stats1["models"]["broken"]["requests"] == 0, stats1["models"])

        for path in ("/v1/chat/completions", "/v1/completions"):
            body = {"model": "nope", "max_tokens": 2, "prompt": "x", "messages": [{"role": "user", "content": "x"}]}
            if path == "/v1/completions":
                del body["messages"]
            else:
                del body["prompt"]
            st, resp, _ = g.request("POST", path, body, timeout=DEADLINE)
            err = json.loads(resp).get("error", {})
            report(f"{path}: an unknown model is 404 model_not_found naming the served ones (OpenAI's shape)",
                   st == 404 and err.get("code") == "model_not_found" and err.get("param") == "model"
                   and "'a', 'b', 'broken'" in err.get("message", ""), (st, resp[:300]))
        st, resp, _ = chat(g, "nope", path="/v1/messages")
        report("/v1/messages: an unknown model is 404 not_found_error in the Anthropic shape",
               st == 404 and resp.get("type") == "error" and resp["error"]["type"] == "not_found_error"
               and "nope" in resp["error"]["message"], resp)
        st, resp, hm = chat(g, "a", path="/v1/messages")
        report("/v1/messages routes by model", st == 200 and resp.get("model") == "a", resp)

        # The conversation key an answer names: the x-session-id, else a stable hash of the
        # conversation's identity (its first turn), in JSON and SSE answers alike.
        _, _, h1 = chat(g, "a", "Same first turn.")
        _, _, h2 = chat(g, "b", "Same first turn.")
        _, _, h3 = chat(g, "a", "Another first turn.")
        _, _, hs = chat(g, "a", headers={"x-session-id": "chat-42"})
        key = h1.get("x-conversation-key", "")
        report("x-conversation-key: the x-session-id when sent, else the first turn's hash (16 hex digits, "
               "the same for the same first turn)",
               hs.get("x-conversation-key") == "chat-42" and len(key) == 16 and all(c in "0123456789abcdef" for c in key)
               and h2.get("x-conversation-key") == key and h3.get("x-conversation-key") not in ("", key)
               and hm.get("x-conversation-key", "") != "", (h1, h2, h3, hs, hm))
        st, raw, hsse = g.request("POST", "/v1/chat/completions",
                                  {"model": "b", "max_tokens": 3, "stream": True,
                                   "messages": [{"role": "user", "content": "Hi"}]},
                                  headers={"x-session-id": "stream-7"}, timeout=DEADLINE)
        report("... a streamed answer names it in its head too",
               st == 200 and hsse.get("x-conversation-key") == "stream-7" and b"[DONE]" in raw, (st, hsse))

        failed = until("broken's engine to be marked failed (a crash loop)",
                       lambda: get(g, "/health")[1]["models"]["broken"]["status"] == "failed")
        st, health = get(g, "/health")
        report("/health is 503 while a model is failed, and says which (per model status)",
               failed and st == 503 and health["models"]["a"]["status"] == "ok"
               and health["models"]["b"]["status"] == "ok" and "broken" in health.get("reason", ""), health)
        sa, ha = get(g, "/health/a")
        sx, hx = get(g, "/health/broken")
        sn, hn = get(g, "/health/nope")
        report("/health/MODEL: 200 for a ready one, 503 for the failed one, 404 for an unknown id",
               sa == 200 and ha["status"] == "ok" and sx == 503 and hx["status"] == "failed" and sn == 404,
               (ha, hx, hn))
        st, resp, _ = chat(g, "broken")
        report("a request for the failed model is 503 (the others serve on)", st == 503, resp)

        m = prometheus(get(g, "/metrics")[1])
        report("/metrics: per-model series (requests, tokens, up) with a model label",
               m.get(("inkling_model_requests_total", (("model", "a"),))) == 5
               and m.get(("inkling_model_requests_total", (("model", "b"),))) == 4
               and m.get(("inkling_model_up", (("model", "a"),))) == 1
               and m.get(("inkling_model_up", (("model", "broken"),))) == 0
               and m.get(("inkling_model_completion_tokens_total", (("model", "b"),)), 0) > 0
               and m.get(("inkling_engine_up", ())) == 0,
               {k: v for k, v in m.items() if "model" in k[0] or k[0] == "inkling_engine_up"})
    finally:
        g.stop()


def on_demand():
    # Two names for the demo model, 1 GB each by --model-memory, a budget of 1.5 GB: one fits.
    g = gateway("--model", f"a={DEMO}", "--model", f"b={DEMO}", "--model-memory", "a=1G", "--model-memory", "b=1G",
                "--memory-budget", "1536M", "--model-load", "on-demand", "--model-idle-timeout", "4")
    try:
        st, health = get(g, "/health")
        report("on demand: nothing runs at start; /health 200 with both models unloaded",
               st == 200 and health["models"]["a"]["status"] == "unloaded"
               and health["models"]["b"]["status"] == "unloaded"
               and health["models"]["a"]["pid"] == 0 and metric(g, "inkling_model_loaded", "a") == 0, health)

        # Two requests at once for the unloaded model: one load, both wait for it and succeed.
        results = []
        ts = [threading.Thread(target=lambda: results.append(chat(g, "a"))) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(DEADLINE)
        report("two requests at once for an unloaded model both wait for its load and succeed; it loads once",
               len(results) == 2 and all(r[0] == 200 and r[1]["model"] == "a" for r in results)
               and metric(g, "inkling_model_loads_total", "a") == 1, (results, g.log_tail()))
        pid_a = get(g, "/health")[1]["models"]["a"]["pid"]

        st, rb, _ = chat(g, "b")
        st_h, health = get(g, "/health")
        report("a request for the other model unloads the idle one to make room (the budget holds one)",
               st == 200 and rb["model"] == "b" and health["models"]["a"]["status"] == "unloaded"
               and health["models"]["b"]["status"] == "ok" and metric(g, "inkling_model_unloads_total", "a") == 1
               and until("a's engine process to end", lambda: not pid_alive(pid_a), 30),
               (health, g.log_tail()))

        pid_b = health["models"]["b"]["pid"]
        gone = until("b to be unloaded after 4 s idle",
                     lambda: get(g, "/health")[1]["models"]["b"]["status"] == "unloaded")
        report("an idle model is stopped after --model-idle-timeout (its engine process ends)",
               gone and metric(g, "inkling_model_unloads_total", "b") == 1
               and until("b's engine process to end", lambda: not pid_alive(pid_b), 30)
               and "unloading (idle for 4 s)" in g.log_tail(20000), g.log_tail())
        st, rb, _ = chat(g, "b")
        report("... and its next request loads it again", st == 200 and rb["model"] == "b"
               and metric(g, "inkling_model_loads_total", "b") == 2, (rb, g.log_tail()))
    finally:
        g.stop()


def budget_while_busy():
    """The budget holds one model and b is busy (the scripted engine holds b's request until
    SIGUSR1): a request for a waits, a stays unloaded, until b's request ends; then b is
    unloaded and a loaded. With --model-load-wait 1 the wait ends in 503 model_unavailable."""
    fake = os.path.join(ROOT, "tests", "gateway", "fake_engine.py")
    for wait_s in ("60", "1"):
        g = gateway("--engine", fake, "--model", f"a={DEMO}", "--model", f"b={DEMO}",
                    "--model-engine-arg", "b=--fake-hold", "--model-memory", "a=1G", "--model-memory", "b=1G",
                    "--memory-budget", "1536M", "--model-load", "on-demand", "--model-load-wait", wait_s)
        results = {}

        def ask(model):
            results[model] = chat(g, model)
        try:
            tb = threading.Thread(target=ask, args=("b",))
            tb.start()
            # ACCEPTed (its prompt tokens counted): the engine holds it, its SIGUSR1 handler set.
            held = until("b's request to be held by its engine",
                         lambda: (metric(g, "inkling_model_prompt_tokens_total", "b") or 0) > 0)
            pid_b = get(g, "/health")[1]["models"]["b"]["pid"]
            ta = threading.Thread(target=ask, args=("a",))
            ta.start()
            asked = until("a's request to arrive", lambda: metric(g, "inkling_model_requests_total", "a") == 1)
            if wait_s == "1":
                ta.join(DEADLINE)
                st, body, _ = results.get("a", (None, {}, None))
                err = body.get("error", {}) if isinstance(body, dict) else {}
                report("--model-load-wait 1: a request for a model that does not fit while the other is busy "
                       "is 503 model_unavailable naming the budget and the busy model",
                       held and st == 503 and err.get("code") == "model_unavailable"
                       and "--memory-budget" in err.get("message", "") and "b (" in err.get("message", ""),
                       results.get("a"))
            else:
                st_h, health = get(g, "/health")
                report("while b is busy, a request for a waits: a stays unloaded and b loaded (no room)",
                       held and asked and "a" not in results and health["models"]["a"]["status"] == "unloaded"
                       and health["models"]["b"]["status"] == "ok"
                       and metric(g, "inkling_model_loads_total", "a") == 0, (health, results))
            os.kill(pid_b, signal.SIGUSR1)  # b's request ends
            tb.join(DEADLINE)
            ta.join(DEADLINE)
            if wait_s == "60":
                report("... once b's request ends, b is unloaded, a loaded, and both requests succeed",
                       results.get("b", (0,))[0] == 200 and results.get("a", (0,))[0] == 200
                       and results["a"][1]["model"] == "a" and metric(g, "inkling_model_unloads_total", "b") == 1
                       and metric(g, "inkling_model_loads_total", "a") == 1, (results, g.log_tail()))
        finally:
            g.stop()


def refused_flags():
    import subprocess
    exe = os.path.join(BUILD, "inkling-gateway")
    cases = [
        (["--model", f"a={DEMO}", "--model", f"a={DEMO}"], "model id 'a' is given to two --model directories"),
        (["--model", f"a={DEMO}", "--model-slots", "c=1"], "no --model is named 'c'"),
        (["--model", f"a={DEMO}", "--model", f"b={DEMO}", "--model-id", "x"], "--model-id names the one --model DIR"),
        (["--model", f"a={DEMO}", "--model-memory", "a=2G", "--memory-budget", "1G"],
         "more than --memory-budget"),
        (["--model", f"a={DEMO}", "--model-load", "later"], "--model-load must be start or on-demand"),
    ]
    for argv, expected in cases:
        p = subprocess.run([exe, *argv, "--port", "1"], capture_output=True, text=True, timeout=DEADLINE)
        report(f"refused at start: {' '.join(argv[-2:])} ({expected})", p.returncode != 0 and expected in p.stderr,
               p.stderr)


refused_flags()
loaded_at_start()
on_demand()
budget_while_busy()
sys.exit(checks.finish())
