#!/usr/bin/env python3
"""turn_reuse_e2e.py [BUILD]: prefix reuse at turn boundaries (#15 item 7) against the real
engine over its wire. A conversation is token ids: each message opens with a role marker
(a --turn-tokens id), and the engine pins a snapshot before each one. A regenerated last
turn, an edited last user message and a branch must reuse exactly the prompt up to the last
boundary they share with the slot's conversation (ACCEPT reused=), and their greedy tokens
must equal a cold run's (reset=1 on another slot), with the same log-probs (on the Vulkan chain
within 1e-5: its rows are not bit-invariant across batch shapes). On the trained demo model
(models/inkling-demo: sliding layers of 32 rows, its tokenizer's <|message_*|> ids found by
default) and on the ring fixture (sliding window 4, no tokenizer: --turn-tokens given, and
prefill chunks of 5 that boundaries cut further); the snapshot pool's bounds (--snapshot-mb,
--snapshot-pins) evict the least recently used pins and answers stay exact; an audio
request's state is never restored into a text request with the same ids.
PASS/FAIL lines; exit 0 when all pass.
"""
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Engine  # noqa: E402
from lib.engine_requests import Result, run_request  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
inkling = os.path.join(build, "inkling")
checks = Checks("engine turn reuse e2e")


class Chat:
    """Conversations as ids for one model: markers open messages, content is seeded ids."""

    def __init__(self, user, model, system, content, text_kind, eos, seed):
        self.user, self.model, self.system, self.text_kind = user, model, system, text_kind
        self.content, self.eos = content, eos
        self.rng = random.Random(seed)

    def words(self, n):
        return [self.rng.choice(self.content) for _ in range(n)]

    def message(self, marker, n):
        return [marker, self.text_kind] + self.words(n)

    def prompt(self, messages):
        """The messages, then the generation prompt (a model marker and a content kind)."""
        ids = [i for m in messages for i in m]
        return ids + [self.model, self.text_kind]


def text(ids):
    return " ".join(map(str, ids)).encode()


def reused(r):
    for f in r.end.fields:
        if f.startswith("reused="):
            return int(f.split("=", 1)[1])
    return None


class Conversations:
    """One engine; slot 0 holds the conversation, slot 1 gives the cold runs."""

    def __init__(self, name, eng, chat, n=12, lp_tol=0.0):
        self.name, self.eng, self.chat, self.n = name, eng, chat, n
        self.count = 0
        # 0: the log-probs equal to the printed digits (the CPU: a row's bits do not depend on
        # the batch it is in). The chain's decode attention splits a row's positions by its
        # step's shape (docs/vulkan.md), so a position computed while decoding and the same
        # position in a cold prompt chunk can differ in the last bits: there, within lp_tol.
        self.lp_tol = lp_tol

    def same_logprobs(self, a, b):
        if self.lp_tol == 0.0:
            return a == b
        return len(a) == len(b) and all(abs(float(x) - float(y)) <= self.lp_tol for x, y in zip(a, b))

    def run(self, slot, prompt, **keys):
        """The request's DONE frame, its tokens' ids and (in .events) their log-probs. With a tokenizer DATA's payload is
        the token's bytes; data_logprobs=1's one alternative is the greedy choice, with its id
        (PROTOCOL.md 6.3: DATA id n lp 1 tid tlp len)."""
        self.count += 1
        rid = f"{self.name}-{self.count}"
        self.eng.submit(rid, slot, text(prompt), self.n, ids=1, data_logprobs=1, **keys)
        r = Result()
        while r.end is None:
            f = self.eng.frame()
            if len(f.fields) > 1 and f.fields[1] == rid:
                if f.kind == "DATA":
                    r.tokens.append(int(f.fields[5]))
                    r.events.append(f.fields[3])  # the chosen token's log-prob, as printed
                elif f.kind in ("DONE", "ERROR"):
                    r.end = f
        if not r.done:
            raise RuntimeError(f"{self.name}: request {self.count} ended {r.end.fields}")
        return r

    def check(self, what, prompt, expect_reused):
        """`prompt` on slot 0 reuses `expect_reused` tokens and answers as a cold run does."""
        warm = self.run(0, prompt)
        cold = self.run(1, prompt, reset=1)
        got = reused(warm)
        # Exact: the same tokens with the same log-probs (to the printed digits).
        ok = (got == expect_reused and warm.tokens == cold.tokens and self.same_logprobs(warm.events, cold.events)
              and len(warm.tokens) > 0 and reused(cold) == 0)
        checks.report(f"{self.name}: {what}: reused {got} of {len(prompt)} (the shared prefix up to the last "
                      f"boundary: {expect_reused}), tokens equal a cold run's",
                      ok, {"reused": got, "expected": expect_reused, "warm": warm.tokens, "cold": cold.tokens,
                           "lp_warm": warm.events, "lp_cold": cold.events})
        return warm


def boundary_cases(name, eng, chat, sizes, lp_tol=0.0):
    """Regenerate, edit the last user message, branch, and go back: each reuses up to the last
    boundary it shares with what slot 0 holds."""
    c = Conversations(name, eng, chat, lp_tol=lp_tol)
    s, u1, a1, u2 = sizes
    sysm = chat.message(chat.system, s)
    m_u1 = chat.message(chat.user, u1)
    m_a1 = chat.message(chat.model, a1) + [chat.eos]
    m_u2 = chat.message(chat.user, u2)
    first = chat.prompt([sysm, m_u1, m_a1, m_u2])
    r = c.run(0, first, reset=1)
    checks.report(f"{name}: the first turn is cold", reused(r) == 0, r.end.fields)
    gen_at = len(first) - 2  # the boundary before the generation prompt
    c.check("regenerate (the same prompt again)", first, gen_at)
    edited = chat.prompt([sysm, m_u1, m_a1, chat.message(chat.user, u2 + 3)])
    c.check("edited last user message", edited, len(sysm) + len(m_u1) + len(m_a1))
    branch = chat.prompt([sysm, m_u1, chat.message(chat.model, a1 - 2) + [chat.eos], chat.message(chat.user, 4)])
    c.check("branch at the first answer", branch, len(sysm) + len(m_u1))
    # The first conversation again: its pins past the branch point were overwritten.
    c.check("back to the first conversation after the branch", first, len(sysm) + len(m_u1))
    # And the branch again: its pins past the first answer went when the first came back.
    last = c.check("back to the branch", branch, len(sysm) + len(m_u1))
    # A follow-up extends the slot's record (the reuse that was there before): the record is
    # the prompt and the answer's tokens but the last, unless EOS ended it (then all were fed).
    fed = branch + (last.tokens if len(last.tokens) < c.n else last.tokens[:-1])
    follow = fed + [chat.user, chat.text_kind] + chat.words(3) + [chat.model, chat.text_kind]
    checks.report(f"{name}: a follow-up extending the slot's record still reuses all of it",
                  reused(c.run(0, follow)) == len(fed))
    # Its new user message opens right where the record ended: that boundary is pinned at
    # admission, so editing the follow-up reuses the whole answer before it.
    c.check("edited follow-up (its boundary was the record's end)",
            fed + [chat.user, chat.text_kind] + chat.words(5) + [chat.model, chat.text_kind], len(fed))
    return c


def start(model, *flags, ctx="1024"):
    """`inkling serve` on `model` with 2 slots, past its info STATS."""
    eng = Engine([inkling, "serve", "--model", model, "--slots", "2", "--ctx", ctx, "--threads", "2", *flags])
    eng.info = eng.frame().json()
    return eng


def stats(eng):
    eng.send(b"STATS\n")
    while True:
        f = eng.frame()
        if f.kind == "STATS":
            return f.json()


# ---- the trained demo model: its tokenizer's markers, 32-row sliding layers ------------
demo = os.path.join(ROOT, "models", "inkling-demo")
eng = start(demo)
# models/inkling-demo/tokenizer.json: <|message_user|> 4066, <|message_model|> 4067,
# <|message_system|> 4068, <|content_text|> 4070, <|content_model_end_sampling|> 4072.
demo_chat = Chat(user=4066, model=4067, system=4068, content=list(range(300, 4000)), text_kind=4070, eos=4072, seed=5)
boundary_cases("demo", eng, demo_chat, (20, 45, 60, 30))
st = stats(eng)["snapshots"]
checks.report("demo: STATS snapshots counts the restores and their tokens, within the default budget",
              st["restored"] >= 6 and st["tokens_restored"] > 0 and 0 < st["bytes"] <= st["budget_bytes"]
              and st["held"] <= st["max"], st)
# A text prompt (the engine tokenizes it) has the same boundaries: the markers are single ids.
turn = "<|message_system|><|content_text|>Thinking effort level: 0<|end_message|><|message_user|><|content_text|>"
cold_text = run_request(eng, "text-1", 0, (turn + "Tell me about the sea.<|end_message|><|message_model|>"
                                           "<|content_text|>").encode(), 8, reset=1)
again = run_request(eng, "text-2", 0, (turn + "Tell me about the sea.<|end_message|><|message_model|>"
                                       "<|content_text|>").encode(), 8)
prompt_tokens = int(again.end.fields[7])
checks.report("demo: a regenerated text prompt reuses all but its generation prompt and answers the same",
              again.tokens == cold_text.tokens and reused(again) == prompt_tokens - 2, (again.end.fields, again.tokens))
checks.report("demo: the engine exits 0 at EOF", eng.close() == 0)

# ---- the same on the Vulkan chain (lavapipe here): a restored state is uploaded whole -----
# The same tokens; log-probs within 1e-5 (the chain's rows are not batch-invariant in their last
# bits: its split decode attention, docs/vulkan.md "Decode attention").
eng = start(demo, "--vulkan", "on")
boundary_cases("demo-vulkan", eng, Chat(user=4066, model=4067, system=4068, content=list(range(300, 4000)),
                                       text_kind=4070, eos=4072, seed=6), (12, 30, 40, 20), lp_tol=1e-5)
checks.report("demo-vulkan: the engine exits 0 at EOF", eng.close() == 0)

# ---- the ring fixture: window 4, no tokenizer, chunks of 5 ------------------------------
ring = os.path.join(build, "fixtures", "ring-hf-f32")
eng = start(ring, "--prefill-chunk", "5", "--turn-tokens", "5,6,7", ctx="512")
ring_chat = Chat(user=5, model=6, system=7, content=list(range(10, 384)), text_kind=8, eos=1, seed=9)
boundary_cases("ring", eng, ring_chat, (9, 13, 17, 6))
checks.report("ring: the engine exits 0 at EOF", eng.close() == 0)

# ---- the pool's bounds ------------------------------------------------------------------
# One MiB holds a few of the demo model's snapshots (each about 150 KB: its sliding rings and
# conv states); a 24-message conversation pins 24. The oldest (shallowest) go first, the
# regenerate still finds the deepest, and every answer is still a cold run's.
eng = start(demo, "--snapshot-mb", "1")
c = Conversations("budget", eng, demo_chat)
msgs = [demo_chat.message(demo_chat.system, 10)] + [
    demo_chat.message(demo_chat.user if i % 2 == 0 else demo_chat.model, 12) for i in range(23)]
long_prompt = demo_chat.prompt(msgs)
c.run(0, long_prompt, reset=1)
st = stats(eng)["snapshots"]
each = eng.info["snapshot_bytes"]  # less 4 bytes an id; the prompt has 336
checks.report("budget: the snapshots held stay within --snapshot-mb 1 and the oldest were evicted; each is "
              "STATS info snapshot_bytes and its ids",
              0 < st["bytes"] <= 1 << 20 and st["taken"] == 24 and st["evicted"] > 0
              and st["held"] == st["taken"] - st["evicted"] and st["held"] == (1 << 20) // (each + 4 * 336)
              and st["held"] * each < st["bytes"] < st["held"] * (each + 4 * 336), (st, each))
c.check("regenerate with the pool over budget (the deepest pin is the newest)", long_prompt, len(long_prompt) - 2)
# An edit of the second message: its boundary's pin was evicted; nothing shallower is held.
early = demo_chat.prompt([msgs[0], demo_chat.message(demo_chat.user, 12)])
warm = c.run(0, early)
cold = c.run(1, early, reset=1)
checks.report("budget: an edit at an evicted boundary prefills from scratch and answers as a cold run",
              reused(warm) == 0 and warm.tokens == cold.tokens, (reused(warm), warm.tokens, cold.tokens))
checks.report("budget: the engine exits 0 at EOF", eng.close() == 0)

eng = start(demo, "--snapshot-pins", "2")
c = Conversations("count", eng, demo_chat)
c.run(0, long_prompt, reset=1)
st = stats(eng)["snapshots"]
checks.report("count: --snapshot-pins 2 keeps the 2 newest of 24", st["held"] == 2 and st["evicted"] == 22, st)
edit = demo_chat.prompt(msgs[:-1] + [demo_chat.message(demo_chat.model, 5)])
c.check("edit of the last message with 2 pins (the next-to-last boundary is held)", edit, len(long_prompt) - 2 - 14)
checks.report("count: the engine exits 0 at EOF", eng.close() == 0)

eng = start(demo, "--snapshot-mb", "0")
c = Conversations("off", eng, demo_chat)
c.run(0, long_prompt, reset=1)
c.check("--snapshot-mb 0: no snapshots, a regenerate is cold", long_prompt, 0)
checks.report("off: the engine exits 0 at EOF", eng.close() == 0)

# ---- audio never restored into text -------------------------------------------------------
# The audio fixture (audio token 451): a user message of audio frames, then the same ids as a
# text request (placeholders without DMel are ordinary ids). The audio state is not restored.
audio = os.path.join(build, "fixtures", "audio-hf-f32")
eng = start(audio, "--turn-tokens", "5,6,7", ctx="256")
with open(os.path.join(audio, "sample.dmel"), "rb") as f:
    dmel = f.read()
frames = len(dmel) // 80
a_chat = Chat(user=5, model=6, system=7, content=list(range(10, 450)), text_kind=8, eos=499, seed=3)
a_prompt = a_chat.prompt([a_chat.message(7, 6), [5, 9] + [451] * frames, a_chat.message(6, 5), a_chat.message(5, 4)])
heard = run_request(eng, "heard", 0, text(a_prompt), 6, ids=1, ext=dmel)
st = stats(eng)["snapshots"]
read = run_request(eng, "read", 0, text(a_prompt), 6, ids=1)
cold = run_request(eng, "read-cold", 1, text(a_prompt), 6, ids=1, reset=1)
checks.report("audio: pins stop at the audio (one before it), and the text request with the same ids restores "
              "nothing of the audio state and answers as a cold run",
              heard.done and st["taken"] == 1 and reused(read) == 0 and read.tokens == cold.tokens,
              (st, reused(read), read.tokens, cold.tokens))
checks.report("audio: the engine exits 0 at EOF", eng.close() == 0)
sys.exit(checks.finish())
