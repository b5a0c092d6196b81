"""Scale-out behind nginx with conversation affinity (#17 item 2): nginx (Debian's package, as a
user-level process on loopback with its own prefix, tests/lib/nginx.py) running the sample
configuration docs/nginx-inkling.conf in front of three gateways, each with its engine on
models/inkling-demo.

1. 30 conversations at once, three turns each, every request with its x-session-id: every turn
   of a conversation reaches one gateway, the conversations spread over the three, and at
   least 95 % of the follow-up turns reuse their prefix: usage.prompt_tokens_details
   .cached_tokens covers at least the previous turn's whole prompt (a conversation that
   landed elsewhere would reuse at most the few tokens every chat prompt starts with).
2. The gateway with the most conversations is killed (SIGKILL) while the next round of turns
   is in flight; every conversation still completes two more turns: the dead gateway's move
   to the others (nginx retries them there), their first turn there is a cold prefill, their
   next one reuses again; the other conversations never move.

    python3 tests/gateway/scale_out_e2e.py BUILD

Prints PASS/FAIL lines (a SKIP line when nginx is not installed: `make deps`); exit status 1 if
any check failed. Standard library only; no timer decides anything.
"""
import json
import os
import signal
import sys
import threading

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "models", "inkling-demo")
SNIPPET = os.path.join(ROOT, "docs", "nginx-inkling.conf")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway  # noqa: E402
from lib import nginx  # noqa: E402

checks = Checks("gateway scale-out e2e")
report = checks.report
CONVERSATIONS = 30
DEADLINE = 120
TOPICS = ["cats", "dogs", "the sea", "a king", "the moon", "a robot", "bread", "rain", "a train", "snow"]


class Conversation:
    def __init__(self, i):
        self.key = f"conversation-{i}"
        self.messages = [{"role": "system", "content": f"You are storyteller number {i}."},
                         {"role": "user", "content": f"Tell me a story about {TOPICS[i % len(TOPICS)]}."}]
        self.turns = []  # per turn: {"status", "upstream", "prompt", "cached"}

    def turn(self, n):
        st, body, headers = n.request("POST", "/v1/chat/completions",
                                      {"model": "inkling-demo", "messages": self.messages, "max_tokens": 8,
                                       "temperature": 0},
                                      {"x-session-id": self.key}, timeout=DEADLINE)
        record = {"status": st, "upstream": headers.get("x-upstream", "").split(",")[-1].strip(),
                  "key": headers.get("x-conversation-key")}
        if st == 200:
            r = json.loads(body)
            record["prompt"] = r["usage"]["prompt_tokens"]
            record["cached"] = r["usage"]["prompt_tokens_details"]["cached_tokens"]
            self.messages = self.messages + [{"role": "assistant", "content": r["choices"][0]["message"]["content"]},
                                             {"role": "user", "content": f"And then? ({len(self.turns) + 1})"}]
        else:
            record["body"] = body[:300]
        self.turns.append(record)
        return st == 200

    def reused(self, t):
        """Turn t (≥ 1) reused at least the whole prompt of turn t-1."""
        a, b = self.turns[t - 1], self.turns[t]
        return b["status"] == 200 and a["status"] == 200 and b["cached"] >= a["prompt"]


def run_turns(n, conversations, count, after_each=None):
    """Every conversation plays `count` turns, all conversations at once (each its own thread)."""
    def play(c):
        for _ in range(count):
            if not c.turn(n):
                return
            if after_each:
                after_each(c)
    threads = [threading.Thread(target=play, args=(c,)) for c in conversations]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE * count)


def main():
    if not nginx.available():
        print("SKIP scale-out behind nginx: no nginx binary (Debian's nginx package; make deps installs it)")
        return
    gateways = []
    n = None
    try:
        # 32 slots: a gateway's share of the conversations (and the dead one's after the kill)
        # each keeps a slot. nginx is a trusted proxy: the per-address cap counts its clients.
        for _ in range(3):
            gateways.append(Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", DEMO, "--slots", "32",
                                     "--ctx", "1024", "--threads", "1", "--max-queue", "64",
                                     "--trusted-proxy", "127.0.0.1", "--max-connections-per-address", "64"]))
        n = nginx.Nginx(SNIPPET, [g.port for g in gateways])
        by_port = {f"127.0.0.1:{g.port}": g for g in gateways}
        conversations = [Conversation(i) for i in range(CONVERSATIONS)]

        run_turns(n, conversations, 3)
        ok = [c for c in conversations if len(c.turns) == 3 and all(t["status"] == 200 for t in c.turns)]
        report(f"{CONVERSATIONS} conversations at once through nginx: every one of the 3 turns answered",
               len(ok) == CONVERSATIONS, [c.turns for c in conversations if c not in ok][:3])
        report("every answer names its conversation (x-conversation-key is the x-session-id)",
               all(t.get("key") == c.key for c in conversations for t in c.turns),
               [(c.key, t.get("key")) for c in conversations for t in c.turns if t.get("key") != c.key][:3])
        sticky = [c for c in conversations if len({t["upstream"] for t in c.turns}) == 1]
        report("every turn of a conversation reached one gateway (hash $inkling_conversation consistent)",
               len(sticky) == CONVERSATIONS, [(c.key, [t["upstream"] for t in c.turns]) for c in conversations
                                              if c not in sticky][:3])
        home = {c.key: c.turns[0]["upstream"] for c in conversations}
        counts = {p: sum(1 for c in conversations if home[c.key] == p) for p in by_port}
        report("the conversations spread over the three gateways", all(v > 0 for v in counts.values()), counts)
        follow = [(c, t) for c in conversations for t in (1, 2)]
        reused = sum(1 for c, t in follow if c.reused(t))
        share = reused / len(follow)
        print(f"follow-up turns that reused their prefix: {reused}/{len(follow)} ({100 * share:.1f} %)", flush=True)
        report("at least 95 % of the follow-up turns reused their prefix (cached_tokens >= the previous prompt)",
               share >= 0.95, [(c.key, c.turns) for c, t in follow if not c.reused(t)][:3])
        report("... and cached_tokens > 0 on every one of those", all(c.turns[t]["cached"] > 0 for c, t in follow
                                                                      if c.reused(t)))

        # Kill the busiest gateway once the next round is under way (whatever is in flight then
        # is retried by nginx: the gateway sent no byte of those answers).
        victim_port = max(counts, key=counts.get)
        victim = by_port[victim_port]
        engine_pid = json.loads(victim.request("GET", "/health")[1])["models"]["inkling-demo"]["pid"]
        answered = [0]
        lock = threading.Lock()
        killed = threading.Event()

        def count_and_kill(c):
            with lock:
                answered[0] += 1
                if answered[0] == 5:
                    victim.proc.send_signal(signal.SIGKILL)
                    killed.set()
            # A conversation of the victim's that got its first answer of the round before the
            # kill waits for the kill before its next turn: else a fast one could finish both
            # turns there and never move (CI saw conversation-3 do so).
            if home[c.key] == victim_port:
                killed.wait(DEADLINE)
        run_turns(n, conversations, 2, after_each=count_and_kill)
        victim.proc.wait(30)
        try:
            os.kill(engine_pid, signal.SIGKILL)  # its engine ends at EOF anyway; not left behind
        except OSError:
            pass
        report("the killed gateway is gone", victim.proc.returncode == -signal.SIGKILL, victim.proc.returncode)
        done = [c for c in conversations if len(c.turns) == 5 and all(t["status"] == 200 for t in c.turns)]
        report("every conversation completes its two more turns after the kill (none lost)",
               len(done) == CONVERSATIONS, [(c.key, c.turns[3:]) for c in conversations if c not in done][:3])
        moved = [c for c in conversations if home[c.key] == victim_port]
        stayed = [c for c in conversations if home[c.key] != victim_port]
        report(f"the dead gateway's {len(moved)} conversations were answered by the others",
               moved and all(t["upstream"] in by_port and t["upstream"] != victim_port
                             for c in moved for t in c.turns[4:]),
               [(c.key, [t["upstream"] for t in c.turns]) for c in moved][:3])
        report("... each on one gateway from then on, and the others' conversations never moved",
               all(len({t["upstream"] for t in c.turns[4:]}) == 1 for c in moved)
               and all(len({t["upstream"] for t in c.turns}) == 1 for c in stayed),
               [(c.key, [t["upstream"] for t in c.turns]) for c in conversations][:4])
        # The moved conversations' turn after the move: its prefix is not on the new gateway.
        first_after = [c.turns[3] if c.turns[3]["upstream"] != victim_port else c.turns[4] for c in moved]
        report("... where their first turn was a cold prefill (less than the previous prompt reused)",
               all(t["status"] == 200 and t["cached"] < t["prompt"] // 2 for t in first_after), first_after[:3])
        settled = [c for c in moved if c.turns[3]["upstream"] != victim_port]
        report("... and the turn after that reused its prefix there again",
               all(c.reused(4) for c in settled), [(c.key, c.turns[3:]) for c in settled if not c.reused(4)][:3])
        report("the conversations that stayed reused their prefix in both later turns",
               sum(1 for c in stayed for t in (3, 4) if c.reused(t)) >= 0.95 * 2 * len(stayed),
               [(c.key, c.turns[2:]) for c in stayed if not (c.reused(3) and c.reused(4))][:3])
    finally:
        if n:
            n.stop()
        for g in gateways:
            g.stop()


main()
sys.exit(checks.finish())
