"""Black-box tests of build/coli: scripted sessions through a pipe in both modes (private
engine and attached to a gateway), one-shot run, audio, an engine killed mid-turn, and
an interactive session under tmux (streaming, Ctrl-C, :reset).

    python3 tests/coli/coli_e2e.py BUILD
"""
import os
import json
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLI = os.path.join(BUILD, "coli")
MODEL = os.path.join(BUILD, "demo-model")
WAV = os.path.join(ROOT, "tests", "fixtures", "audio", "speech_16k_mono_s16.wav")
# The trained demo model (coli's default) and the PyTorch reference's greedy turn on it.
TRAINED = os.path.join(ROOT, "models", "inkling-demo")
GOLDEN = os.path.join(ROOT, "tests", "fixtures", "demo", "inkling-demo.json")
# The engine's --fault-hold-after (docs/configuration.md, "Fault hooks"): an answer holds
# after HOLD tokens until coli STOPs or CANCELs it, so a Ctrl-C or a kill meets it in flight.
HOLD = 4
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Gateway, free_port  # noqa: E402

checks = Checks("coli e2e")
report = checks.report


def session(args, script, timeout=120):
    p = subprocess.run([COLI] + args, input=script, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def hold_engine(tmp):
    """An --engine for coli: the real engine with --fault-hold-after HOLD."""
    path = os.path.join(tmp, "held-engine")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec "{os.path.join(BUILD, "inkling")}" "$@" --fault-hold-after={HOLD}\n')
    os.chmod(path, 0o755)
    return path


def footers(text):
    return re.findall(r"\[(\d+) tokens, [\d.]+ tok/s, first token \d+ ms", text)


def main():
    unused = f"http://127.0.0.1:{free_port()}"
    # -- private engine, scripted through a pipe ------------------------------------------
    rc, out, err = session(["chat", "--attach", unused, "--model", MODEL, "--max-tokens", "6"],
                           "Hello there\n:reset\nSecond question\n:bogus\n:q\n")
    report("private engine: a scripted session answers each turn with a footer",
           rc == 0 and "private engine" in out and len(footers(out)) == 2 and "[new conversation]" in out
           and "unknown command :bogus" in out, (rc, out, err))
    rc, out, err = session(["chat", "--no-attach", "--model", MODEL, "--max-tokens", "4", "--temperature", "0"],
                           "one\ntwo\nthree\n:q\n")
    reused = [int(n) for n in re.findall(r"reused (\d+) of", out)]
    report("private engine: follow-up turns reuse the conversation's prefix in the engine",
           rc == 0 and len(reused) == 3 and reused[0] == 0 and reused[1] > 0 and reused[2] > reused[1], (reused, out))
    rc, out, err = session(["chat", "--no-attach", "--model", MODEL, "--max-tokens", "3"],
                           f":audio {WAV}\nwhat is said?\n:audio /nonexistent.wav\n:q\n")
    report("private engine: :audio sends a clip with the next message",
           rc == 0 and "audio frames from" in out and len(footers(out)) == 1 and "error:" in out, (out, err))
    # The reference's greedy answer (tests/fixtures/demo, tools/train-tiny/demo_goldens.py)
    # up to its end-of-turn marker, which coli does not print.
    golden = json.load(open(GOLDEN))
    want = golden["text"].split("<|end_message|>")[0]
    rc, out, err = session(["run", golden["prompt_text"], "--no-attach", "--model", TRAINED, "--temperature", "0",
                            "--max-tokens", "64"], "")
    report("coli run on the trained demo model prints the reference's greedy answer, exit 0",
           rc == 0 and out.rstrip("\n") == want, (rc, out, want, err[-300:]))
    # The private engine's log: a fresh 0600 file in $TMPDIR, removed when coli ends, kept
    # (and named) when the engine failed.
    tmp = tempfile.mkdtemp(prefix="coli-tmp-")
    try:
        env = dict(os.environ, TMPDIR=tmp)
        p = subprocess.run([COLI, "run", "Say something", "--no-attach", "--model", MODEL, "--max-tokens", "2"],
                           capture_output=True, text=True, timeout=120, env=env)
        left = os.listdir(tmp)
        report("coli run: the private engine's log is removed at exit", p.returncode == 0 and left == [],
               (p.returncode, left, p.stderr[-300:]))
        p = subprocess.run([COLI, "run", "x", "--no-attach", "--model", MODEL, "--engine", "/bin/false"],
                           capture_output=True, text=True, timeout=60, env=env)
        left = os.listdir(tmp)
        report("coli run: an engine that fails silently leaves no log", p.returncode != 0 and left == [],
               (p.returncode, left, p.stderr[-300:]))
        # sh reads "serve" as its script and says it cannot open it.
        p = subprocess.run([COLI, "run", "x", "--no-attach", "--model", MODEL, "--engine", "/bin/sh"],
                           capture_output=True, text=True, timeout=60, env=env)
        logs = [os.path.join(tmp, f) for f in os.listdir(tmp)]
        modes = [oct(os.lstat(f).st_mode & 0o777) for f in logs]
        report("coli run: an engine that fails with words leaves its log, private (0600) and named in the error",
               p.returncode != 0 and len(logs) == 1 and modes == ["0o600"] and logs[0] in p.stderr,
               (p.returncode, logs, modes, p.stderr[-300:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rc, out, err = session(["run", "x", "--no-attach", "--model", MODEL, "--max-tokens", "0"], "")
    report("coli: --max-tokens outside the protocol's 1..1048576 is refused", rc != 0 and "--max-tokens" in err, (rc, err))
    rc, out, err = session(["run", "x", "--attach", unused], "")
    report("coli run with neither gateway nor model: a clear error", rc != 0 and "no ready gateway" in err, (rc, err))

    # -- attached to a gateway that `coli serve` started ----------------------------------
    gw = Gateway([COLI, "serve", "--model", MODEL, "--slots", "2", "--ctx", "1024", "--threads", "2"],
                 ready_timeout=120)
    port = gw.port
    try:
        rc, out, err = session(["chat", "--attach", f"http://127.0.0.1:{port}", "--max-tokens", "6"],
                               f"Hello\n:audio {WAV}\nAnd this?\n:stats\n:q\n")
        report("coli serve starts the gateway; attached, a scripted session streams through it, audio included",
               rc == 0 and f"gateway http://127.0.0.1:{port}" in out and len(footers(out)) == 2
               and '"gateway"' in out, (rc, out, err))
    finally:
        gw.stop()

    # -- the engine dies mid-turn: a clear message, no hang ---------------------------------
    tmp = tempfile.mkdtemp(prefix="coli-hold-")
    held = hold_engine(tmp)
    p = subprocess.Popen([COLI, "chat", "--no-attach", "--model", MODEL, "--engine", held, "--max-tokens", "100000",
                          "--ctx", "100000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, errors="replace")  # os.read below may cut a UTF-8 character
    p.stdin.write("tell me everything\n")
    p.stdin.flush()
    # Kill the engine once the answer is streaming (not while it still loads); it holds after
    # HOLD tokens, so it is still in flight. Each read waits at most until the deadline.
    seen, deadline = "", time.time() + 120
    while time.time() < deadline:
        if "assistant:" in seen and seen.split("assistant:", 1)[1].strip():
            break
        if not select.select([p.stdout], [], [], max(0.0, deadline - time.time()))[0]:
            break
        chunk = os.read(p.stdout.fileno(), 4096).decode(errors="replace")
        if not chunk:
            break
        seen += chunk
    kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    for k in kids:
        os.kill(int(k), signal.SIGKILL)
    try:
        out, err = p.communicate(":q\n", timeout=30)
        out = seen + out
        ok = bool(kids) and "killed by signal 9" in out
    except subprocess.TimeoutExpired:
        p.kill()
        out, err, ok = "(hung)", "", False
    report("engine killed mid-turn: coli says so and does not hang", ok, (kids, out[-400:], err[-200:]))

    # -- interactive, under tmux -----------------------------------------------------------
    # The answer holds after HOLD tokens: it streams, and no footer can come before Ctrl-C.
    sess = f"coli-test-{os.getpid()}"
    tmux = lambda *a: subprocess.run(["tmux", *a], capture_output=True, text=True, timeout=30)
    tmux("new-session", "-d", "-s", sess, "-x", "160", "-y", "50",
         f"{COLI} chat --no-attach --model {MODEL} --engine {held} --max-tokens 3000 --ctx 4096; sleep 30")
    try:
        def pane():
            return tmux("capture-pane", "-p", "-t", sess, "-S", "-200").stdout

        def wait_for(pattern, seconds=30):
            deadline = time.time() + seconds
            while time.time() < deadline:
                text = pane()
                if re.search(pattern, text):
                    return text
                time.sleep(0.1)
            return None

        started = wait_for(r"you>") is not None
        tmux("send-keys", "-t", sess, "Hello from tmux", "Enter")
        # Answer text on the screen after the question (the footer cannot come yet).
        mid = wait_for(r"Hello from tmux\s*\n\s*\S") or pane()
        after = mid.split("Hello from tmux")[-1]
        streaming = "Hello from tmux" in mid and after.strip() != "" and "tokens," not in after
        # The first token is on the screen; the engine holds after HOLD of them, so waiting
        # lets them all arrive before the Ctrl-C (under a loaded suite the 4th came after it).
        time.sleep(0.5)
        tmux("send-keys", "-t", sess, "C-c")
        stopped = wait_for(rf"\[{HOLD} tokens, .*stopped\]")
        tmux("send-keys", "-t", sess, ":reset", "Enter")
        reset = wait_for(r"\[new conversation\]")
        tmux("send-keys", "-t", sess, ":q", "Enter")
        report("tmux: the prompt appears and the answer streams before its footer", started and streaming, mid[-500:])
        report(f"tmux: Ctrl-C stops the answer (footer: its {HOLD} tokens, stopped)", stopped is not None,
               pane()[-500:])
        report("tmux: :reset starts a new conversation", reset is not None, pane()[-300:])
    finally:
        tmux("kill-session", "-t", sess)
        shutil.rmtree(tmp, ignore_errors=True)

    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
