"""Black-box tests of build/inkling-gateway against hostile clients (issue 20): cross-site
requests, bodies that cost more than their size, audio bombs. One gateway on the demo model
serves most checks.

    python3 tests/gateway/gateway_hostile.py BUILD

Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only.
"""
import json
import os
import sys

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(BUILD, "demo-model")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway  # noqa: E402

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


def main():
    g = start()
    try:
        cross_site(g)
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
