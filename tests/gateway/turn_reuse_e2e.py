#!/usr/bin/env python3
"""turn_reuse_e2e.py [BUILD]: prefix reuse across regenerated, edited and branched turns
(#15 item 7) through the gateway's HTTP API on the trained demo model (models/inkling-demo).
A chat client regenerates by sending the same messages minus the last assistant turn; the
engine resumes from its snapshot at the last turn boundary, the answer is the same, and
usage.prompt_tokens_details.cached_tokens (the Messages API's cache_read_input_tokens) says
how much was reused: everything but the two generation-prompt tokens. Edits and branches
reuse the conversation up to the message they change. Every answer is compared with a second
gateway whose engine keeps no snapshots (--engine-arg=--snapshot-mb=0), where each of these
requests is a cold prefill (its cached_tokens is 0).
PASS/FAIL lines; exit 0 when all pass.
"""
import json
import os
import sys

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "inkling-demo")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway  # noqa: E402

checks = Checks("gateway turn reuse e2e")


def start(*extra):
    return Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL, "--slots", "1", "--ctx", "2048",
                    "--threads", "2"] + list(extra))


def chat(gw, messages, max_tokens=12):
    status, body, _ = gw.request("POST", "/v1/chat/completions",
                                 {"model": "inkling-demo", "messages": messages, "max_tokens": max_tokens,
                                  "temperature": 0})
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {body[:300]!r}")
    j = json.loads(body)
    u = j["usage"]
    return j["choices"][0]["message"]["content"], u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]


warm_gw = start()
cold_gw = start("--engine-arg=--snapshot-mb=0")


def compare(what, messages, expect_cached):
    """`messages` on the warm gateway reuses `expect_cached` tokens (a number, or a predicate
    of the prompt's token count) and answers as the cold one, which reused nothing."""
    answer, prompt, cached = chat(warm_gw, messages)
    cold_answer, cold_prompt, cold_cached = chat(cold_gw, messages)
    want = expect_cached(prompt) if callable(expect_cached) else expect_cached
    checks.report(f"{what}: cached_tokens {cached} of {prompt} (expected {want}), the answer equals a cold "
                  f"prefill's", cached == want and answer == cold_answer and cold_cached == 0 and prompt == cold_prompt,
                  {"answer": answer, "cold": cold_answer, "cached": cached, "cold_cached": cold_cached})
    return answer, prompt, cached


try:
    system = {"role": "system", "content": "You are a helpful assistant who answers briefly."}
    first = [system, {"role": "user", "content": "Tell me about the sea and the ships on it."}]
    a1, p1, c1 = chat(warm_gw, first)
    checks.report("the first turn is cold", c1 == 0 and p1 > 0, (a1, p1, c1))
    conv = first + [{"role": "assistant", "content": a1}, {"role": "user", "content": "And what about the sky?"}]
    a2, p2, c2 = chat(warm_gw, conv)
    # Regenerate: the same messages minus the last assistant turn (which the client drops).
    a2r, p2r, c2r = compare("regenerate the last answer", conv, lambda p: p - 2)
    checks.report("the regenerated answer equals the first one", a2r == a2 and p2r == p2, (a2, a2r))
    # Edit the last user message: reuse ends where it began. An empty user message renders
    # nothing (protocol/tml_render.cpp), so its prompt, less the generation prompt, is that point.
    _, p_empty, _ = chat(cold_gw, first + [{"role": "assistant", "content": a1}, {"role": "user", "content": ""}], 1)
    edited = first + [{"role": "assistant", "content": a1}, {"role": "user", "content": "Is the moon far away?"}]
    compare("edit the last user message", edited, p_empty - 2)
    # A branch at the first answer: reuse ends before the assistant message it replaces.
    branch = first + [{"role": "assistant", "content": "Ships sail."}, {"role": "user", "content": "Which ones?"}]
    compare("branch at the first answer", branch, p1 - 2)
    # Back to the edited conversation: its own pins went when the branch overwrote the slot.
    compare("back to the edited conversation", edited, p1 - 2)
    # The Messages API reports the same reuse as cache_read_input_tokens.
    body = {"model": "inkling-demo", "max_tokens": 8, "temperature": 0, "system": system["content"],
            "messages": [m for m in edited if m["role"] != "system"]}
    status, raw, _ = warm_gw.request("POST", "/v1/messages", body)
    u = json.loads(raw)["usage"] if status == 200 else {}
    checks.report("/v1/messages: a regenerate reports cache_read_input_tokens > 0",
                  status == 200 and u.get("cache_read_input_tokens", 0) > 0, (status, u))
finally:
    warm_gw.stop()
    cold_gw.stop()
sys.exit(checks.finish())
