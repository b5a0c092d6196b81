"""Black-box tests of what docs/gateway.md promises about serving a model (issue 19 item 6),
against build/inkling-gateway and the real engine (`build/inkling serve`): reasoning_effort →
reasoning_content on a turn that thinks, the developer and tool roles, slot affinity and
prefix reuse (seen in the engine's STATS), cache_slot, the /metrics histograms. Greedy
decoding on two small models: models/inkling-demo (trained; it answers at once) and
BUILD/demo-model (random layers on the real vocabulary; at a non-zero effort it thinks).

The oracle for what a chat turn must return is the same engine through /v1/completions,
fed the TMLv0 prompt this file renders by hand from protocol/PROTOCOL.md §12.1: its raw
output (markers included), split into the two channels as docs/gateway.md says.

    python3 tests/gateway/documented_model_features.py BUILD

Prints PASS/FAIL lines; exit status 1 if any check failed. Standard library only.
"""
import json
import os
import re
import socket
import sys
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINED = os.path.join(ROOT, "models", "inkling-demo")
RANDOM = os.path.join(BUILD, "demo-model")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway, read_all  # noqa: E402
from lib.scrape import histogram_moves, prometheus, sse_events  # noqa: E402

checks = Checks("gateway documented model features")
report = checks.report
DEADLINE = 30

SYS, USER, MODEL, TOOL = "<|message_system|>", "<|message_user|>", "<|message_model|>", "<|message_tool|>"
TEXT, END, END_SAMPLING = "<|content_text|>", "<|end_message|>", "<|content_model_end_sampling|>"
THINKING = "<|content_thinking|>"
MARKER = re.compile(r"<\|[a-z0-9_]+\|>")


def start(model, slots=2):
    return Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", model, "--slots", str(slots), "--ctx", "1024",
                    "--threads", "2"])


def post(g, path, body):
    st, resp, _ = g.request("POST", path, body, timeout=DEADLINE)
    return st, (json.loads(resp) if st == 200 else resp)


def render(messages, effort):
    """PROTOCOL.md §12.1, by hand: one message per text part, the effort line before the first
    message that is not system/developer, the generation prompt (and <|content_text|> at 0)."""
    marker = {"system": SYS, "developer": SYS, "user": USER, "assistant": MODEL, "tool": TOOL}
    out, effort_written = "", False
    for m in messages:
        if not effort_written and m["role"] not in ("system", "developer"):
            out += f"{SYS}{TEXT}Thinking effort level: {effort}{END}"
            effort_written = True
        out += marker[m["role"]] + m.get("name", "") + TEXT + m["content"] + END
        if m["role"] == "assistant":
            out += END_SAMPLING
    return out + MODEL + (TEXT if effort == 0 else "")


def channels(raw, start_in_content):
    """docs/gateway.md's split of raw model output: after <|content_thinking|> reasoning,
    after <|content_text|> the answer, every other marker dropped."""
    out = {"reasoning_content": "", "content": ""}
    channel, at = "content" if start_in_content else "reasoning_content", 0
    for m in MARKER.finditer(raw):
        out[channel] += raw[at:m.start()]
        at = m.end()
        if m.group() == THINKING:
            channel = "reasoning_content"
        elif m.group() == TEXT:
            channel = "content"
    out[channel] += raw[at:]
    return out


def oracle(g, model_id, messages, effort, max_tokens):
    """The raw completion of the hand-rendered prompt: (its channels, usage)."""
    st, r = post(g, "/v1/completions", {"model": model_id, "prompt": render(messages, effort),
                                         "max_tokens": max_tokens, "temperature": 0})
    if st != 200:
        return None, r
    return channels(r["choices"][0]["text"], effort == 0), r["usage"]


def streamed(g, body):
    """A streamed chat turn: ({reasoning_content, content} concatenated, the event list)."""
    s = socket.create_connection(("127.0.0.1", g.port), timeout=DEADLINE)
    data = json.dumps(dict(body, stream=True))
    s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(data)}\r\n\r\n{data}").encode())
    events = sse_events(read_all(s, timeout=DEADLINE))
    s.close()
    deltas = [e["choices"][0]["delta"] for e in events if isinstance(e, dict) and e.get("choices")]
    return {k: "".join(d.get(k, "") for d in deltas) for k in ("reasoning_content", "content")}, events


def reasoning(g, model_id, effort_level, effort, thinks):
    """reasoning_effort → the effort line; the turn's channels equal the oracle's split."""
    messages = [{"role": "user", "content": "What is two plus two?"}]
    body = {"model": model_id, "messages": messages, "max_tokens": 16, "temperature": 0,
            "reasoning_effort": effort_level}
    want, usage = oracle(g, model_id, messages, effort, 16)
    st, r = post(g, "/v1/chat/completions", body)
    msg = r["choices"][0]["message"] if st == 200 else r
    got = {"reasoning_content": msg.get("reasoning_content", ""), "content": msg.get("content")} if st == 200 else msg
    what = "thinks: reasoning_content" if thinks else "answers at once: content, no reasoning_content"
    report(f"{model_id}, reasoning_effort {effort_level}: the turn {what}, exactly the oracle's split of the raw "
           "output",
           want is not None and got == want and bool(want["reasoning_content"]) == thinks
           and ("reasoning_content" in msg) == thinks and r["usage"]["prompt_tokens"] == usage["prompt_tokens"]
           and r["usage"]["completion_tokens"] == usage["completion_tokens"], (got, want, r.get("usage"), usage))
    text, events = streamed(g, body)
    report(f"{model_id}, reasoning_effort {effort_level}: streamed, the same channels, then [DONE]",
           text == want and events[-1:] == ["[DONE]"], (text, want, events[-2:]))


def roles(g, model_id):
    """developer and tool messages reach the model as §12.1 renders them: the turn equals
    the oracle's (prompt tokens and the greedy answer)."""
    messages = [{"role": "developer", "content": "Answer with a fortune."},
                {"role": "user", "content": "Tell me a fortune about cats."},
                {"role": "assistant", "content": "Let me look one up."},
                {"role": "tool", "name": "fortune", "content": "Cats sleep sixteen hours a day."},
                {"role": "user", "content": "And?"}]
    want, usage = oracle(g, model_id, messages, 0, 16)
    st, r = post(g, "/v1/chat/completions", {"model": model_id, "messages": messages, "max_tokens": 16,
                                             "temperature": 0})
    got = r["choices"][0]["message"]["content"] if st == 200 else r
    report(f"{model_id}: a chat with developer and tool messages is the oracle's turn (prompt tokens, greedy answer)",
           want is not None and got == want["content"] and r["usage"]["prompt_tokens"] == usage["prompt_tokens"],
           (got, want, st == 200 and r["usage"], usage))
    st2, r2 = post(g, "/v1/chat/completions", {"model": model_id, "messages": [dict(messages[0], role="system")]
                                               + messages[1:], "max_tokens": 16, "temperature": 0})
    report(f"{model_id}: ... and with the developer message as system, the same turn",
           st2 == 200 and r2["choices"][0]["message"]["content"] == got
           and r2["usage"]["prompt_tokens"] == r["usage"]["prompt_tokens"], (st2, r2))


def engine_stats(g, done):
    """The engine's STATS once it has finished `done` requests (it sends them after each DONE;
    /v1/stats asks for fresh ones)."""
    deadline, stats = time.time() + DEADLINE, {}
    while time.time() < deadline:
        stats = json.loads(g.request("GET", "/v1/stats", timeout=DEADLINE)[1])["engine"]["stats"]
        if stats.get("requests_done") == done:
            return stats
        time.sleep(0.05)
    raise RuntimeError(f"the engine's STATS never showed {done} requests done: {stats}")


def positions(stats):
    return [s["positions"] for s in stats["slots"]]


def affinity_and_reuse(g, model_id):
    """Every turn of a conversation goes to the slot its earlier turn used — the one the
    gateway remembered, not the one the conversation hashes to — and the engine prefills
    only the new tail; the answer equals a cold run's."""
    conv = [{"role": "system", "content": "You are a fortune teller."},
            {"role": "user", "content": "Tell me a fortune about cats."}]

    def turn(messages, **kw):
        st, r = post(g, "/v1/chat/completions", {"model": model_id, "messages": messages, "max_tokens": 8,
                                                 "temperature": 0, **kw})
        if st != 200:
            raise RuntimeError(f"a turn failed: {st} {r}")
        return r
    first = turn(conv)
    s1 = engine_stats(g, 1)
    hashed = [i for i, p in enumerate(positions(s1)) if p > 0]
    report("a first turn fills one slot (the one its conversation hashes to)", len(hashed) == 1, positions(s1))
    if len(hashed) != 1:
        return
    h = hashed[0]
    k = (h + 1) % len(s1["slots"])
    turn(conv, cache_slot=k)
    s2 = engine_stats(g, 2)
    report(f"cache_slot {k}: the same first turn is built in slot {k}, slot {h} untouched",
           positions(s2)[k] == positions(s1)[h] and positions(s2)[h] == positions(s1)[h],
           (positions(s1), positions(s2)))
    follow = conv + [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                     {"role": "user", "content": "And one about dogs?"}]
    second = turn(follow)
    s3 = engine_stats(g, 3)
    reused = s3["prompt_tokens_reused"] - s2["prompt_tokens_reused"]
    report(f"the next turn (no cache_slot) goes to the remembered slot {k}, not the hashed {h}",
           positions(s3)[k] > positions(s2)[k] and positions(s3)[h] == positions(s2)[h], (positions(s2), positions(s3)))
    report("... and the engine reuses the whole first turn: prompt_tokens_reused grows by what the slot held",
           reused == positions(s2)[k] and reused >= first["usage"]["prompt_tokens"],
           (reused, positions(s2)[k], first["usage"]))
    cold_slot = (set(range(len(s1["slots"]))) - {h, k}).pop()
    cold = turn(follow, cache_slot=cold_slot)
    s4 = engine_stats(g, 4)
    report("... a cold run of that turn (an empty slot) reuses nothing and answers the same",
           s4["prompt_tokens_reused"] == s3["prompt_tokens_reused"]
           and cold["choices"][0]["message"]["content"] == second["choices"][0]["message"]["content"]
           and cold["usage"]["prompt_tokens"] == second["usage"]["prompt_tokens"]
           and cold["usage"]["completion_tokens"] == second["usage"]["completion_tokens"], (cold, second))
    report("... usage.prompt_tokens_details.cached_tokens says what each reused: the warm turn its prefix, "
           "the cold one none",
           second["usage"]["prompt_tokens_details"]["cached_tokens"] == reused
           and cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, (second["usage"], cold["usage"], reused))


def metrics_histograms(g, model_id):
    """On the real engine the histograms count each request's first token, every later
    token (completion_tokens − 1 gaps) and its whole duration."""
    scrape = lambda: prometheus(g.request("GET", "/metrics", timeout=DEADLINE)[1].decode())  # noqa: E731
    before = scrape()
    walls, tokens = [], []
    for i, n in enumerate((3, 9, 5)):
        t0 = time.monotonic()
        st, r = post(g, "/v1/chat/completions", {"model": model_id, "max_tokens": n, "temperature": 0,
                                                 "messages": [{"role": "user", "content": f"Tell me a fortune, {i}."}]})
        walls.append(time.monotonic() - t0)
        tokens.append(r["usage"]["completion_tokens"] if st == 200 else 0)
    after = scrape()
    expected = {"inkling_time_to_first_token_seconds": (3, walls), "inkling_request_duration_seconds": (3, walls),
                "inkling_inter_token_seconds": (sum(t - 1 for t in tokens), None)}
    for name, (count, timed) in expected.items():
        problems = histogram_moves(before, after, name, count, timed)
        report(f"{model_id}: {name} moved by {count} observations for 3 requests of {tokens} tokens, consistently",
               all(tokens) and not problems, (tokens, problems))


def scenario(fn, *args):
    """Runs one group of checks; an exception (a gateway that would not start, a timeout)
    is its FAIL line, and the next group runs."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 — any failure of the group is reported, not raised
        report(f"{fn.__name__} ran to its end", False, f"{type(e).__name__}: {e}")


def main():
    g = start(RANDOM)
    try:
        scenario(reasoning, g, "demo-model", "high", 0.9, True)
        scenario(reasoning, g, "demo-model", "none", 0, False)
    finally:
        g.stop()
    g = start(TRAINED, slots=3)
    try:
        scenario(reasoning, g, "inkling-demo", "medium", 0.7, False)
        scenario(roles, g, "inkling-demo")
        scenario(metrics_histograms, g, "inkling-demo")
    finally:
        g.stop()
    g = start(TRAINED, slots=3)  # empty slots: which one a turn fills is seen in the engine's STATS
    try:
        scenario(affinity_and_reuse, g, "inkling-demo")
    finally:
        g.stop()
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
