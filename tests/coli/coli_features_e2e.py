#!/usr/bin/env python3
"""coli_features_e2e.py [BUILD]: what docs/coli.md promises that coli_e2e.py does not check,
each against an oracle coli did not produce:

  - the default model (no --model): the committed models/inkling-demo, whose greedy answer
    is the reference's (tests/fixtures/demo, from tools/reference), in `run` and in `chat`
  - --system and --effort: the prompt coli sends (recorded on the engine's stdin by a `tee`
    in front of the real engine, --engine) is the TMLv0 chat (docs/model.md, "TMLv0
    prompts") written out, and the answer is the engine's to those ids
  - coli run --audio F.wav: the DMel frames coli sends are the committed DMel of that WAV
    (made by the numpy reference DSP, tools/reference), and the answer is `inkling run`'s
    with those frames
  - under tmux: :help lists the commands; Ctrl-D at the prompt quits (exit 0); attached to a
    gateway whose engine holds the answer after 16 tokens (--fault-hold-after), Ctrl-C stops
    it (footer "stopped", the tokens streamed) and the gateway cancels it (its /metrics count
    the client's cancel, no request active); a second Ctrl-C quits (exit 0)

PASS/FAIL lines; exit 0 when all pass.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tools", "train-tiny"))
import bpe  # noqa: E402
from lib import Checks, Gateway  # noqa: E402
from lib.tmux import Pane  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
COLI = os.path.join(BUILD, "coli")
INKLING = os.path.join(BUILD, "inkling")
DEMO = os.path.join(ROOT, "models", "inkling-demo")
RANDOM_DEMO = os.path.join(BUILD, "demo-model")  # random weights, long answers, an audio tower
WAV = os.path.join(ROOT, "tests", "fixtures", "audio", "speech_16k_mono_s16.wav")
DMEL = os.path.join(ROOT, "tests", "fixtures", "audio", "speech_16k_mono_s16.dmel")
checks = Checks("coli features e2e")
report = checks.report
golden = json.load(open(os.path.join(ROOT, "tests", "fixtures", "demo", "inkling-demo.json")))
END = "<|end_message|>"
golden_answer = golden["text"].split(END)[0]


def coli(*args, timeout=120):
    p = subprocess.run([COLI, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def content_of(engine_text):
    """What coli shows of an engine's text: the content after an opening content marker, up
    to the end of the message (the gateway's output splitter strips the markers)."""
    t = engine_text[len("<|content_text|>"):] if engine_text.startswith("<|content_text|>") else engine_text
    return t.split(END)[0]


def chat_prompt(user, system=None, effort="0", audio_frames=0):
    """TMLv0 (docs/model.md): system messages, then the effort line, the user's parts one
    block each, the model's turn (in content mode at effort 0)."""
    text = f"<|message_system|><|content_text|>{system}{END}" if system else ""
    text += f"<|message_system|><|content_text|>Thinking effort level: {effort}{END}"
    text += f"<|message_user|><|content_text|>{user}{END}"
    if audio_frames:
        text += "<|message_user|><|content_audio_input|>" + "<|audio|>" * audio_frames + f"<|audio_end|>{END}"
    return text + "<|message_model|>" + ("<|content_text|>" if effort == "0" else "")


def recorded_submit(path):
    """The first SUBMIT on a recorded engine stdin: (prompt bytes, extension bytes)."""
    data = open(path, "rb").read()
    at = data.index(b"SUBMIT ")
    line_end = data.index(b"\n", at)
    f = data[at:line_end].decode().split()
    n_prompt = int(f[3])
    n_ext = int(f[7]) if len(f) > 7 else 0
    body = data[line_end + 1:line_end + 1 + n_prompt + n_ext]
    return body[:n_prompt], body[n_prompt:]


def engine_reply(model, ids, n):
    args = [INKLING, "run", "--model", model, "--ids", ",".join(map(str, ids)), "-n", str(n), "--json",
            "--threads", "2"]
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)["text"]


def metric(gw, name):
    _, body, _ = gw.request("GET", "/metrics")
    m = re.search(rf"^{name} (\S+)$", body.decode(), re.M)
    return float(m.group(1)) if m else None


tmp = tempfile.mkdtemp(prefix="coli-features-")
try:
    # An engine that records its stdin: `tee` in front of the real one.
    wire = os.path.join(tmp, "wire")
    tee_engine = os.path.join(tmp, "recording-engine")
    with open(tee_engine, "w") as f:
        f.write(f"#!/bin/sh\ntee '{wire}' | exec '{INKLING}' \"$@\"\n")
    os.chmod(tee_engine, stat.S_IRWXU)

    # -- the default model -----------------------------------------------------------------------
    rc, out, err = coli("run", golden["prompt_text"], "--no-attach", "--temperature", "0", "--max-tokens", "64")
    report("coli run without --model answers as the reference does on models/inkling-demo",
           rc == 0 and out == golden_answer + "\n", (rc, out, golden_answer, err[-300:]))
    p = subprocess.run([COLI, "chat", "--no-attach", "--temperature", "0", "--max-tokens", "64"],
                       input=golden["prompt_text"] + "\n:q\n", capture_output=True, text=True, timeout=120)
    report("coli chat without --model: the demo model, named, and the reference's answer",
           p.returncode == 0 and f"private engine on {DEMO}" in p.stdout
           and f"assistant: {golden_answer}\n" in p.stdout, (p.returncode, p.stdout[-600:]))

    # -- --system and --effort --------------------------------------------------------------------
    demo_tok = bpe.Tokenizer.load(os.path.join(DEMO, "tokenizer.json"))
    system = "You answer with a fortune."
    for effort, value in (("none", "0"), ("high", "0.9"), ("xhigh", "0.99")):
        if os.path.exists(wire):
            os.unlink(wire)
        rc, out, err = coli("run", golden["prompt_text"], "--no-attach", "--model", DEMO, "--engine", tee_engine,
                            "--system", system, "--effort", effort, "--temperature", "0", "--max-tokens", "40")
        prompt, _ = recorded_submit(wire) if os.path.exists(wire) else (b"", b"")
        want = chat_prompt(golden["prompt_text"], system, value)
        report(f"coli --system --effort {effort}: the prompt sent is the spec's chat (system message, then "
               f"'Thinking effort level: {value}')", rc == 0 and prompt.decode() == want, (prompt, want, err[-300:]))
        reply = content_of(engine_reply(DEMO, demo_tok.encode(want), 40))
        report(f"coli --system --effort {effort}: the answer is the engine's to those ids",
               out == reply + "\n" and reply.strip() != "", (out, reply))

    # -- coli run --audio ----------------------------------------------------------------------------
    if os.path.exists(wire):
        os.unlink(wire)
    rc, out, err = coli("run", "what is said?", "--audio", WAV, "--no-attach", "--model", RANDOM_DEMO, "--engine",
                        tee_engine, "--temperature", "0", "--max-tokens", "8")
    prompt, ext = recorded_submit(wire) if os.path.exists(wire) else (b"", b"")
    dmel = open(DMEL, "rb").read()
    frames = len(dmel) // 80
    report(f"coli run --audio: the {frames} frames sent are the reference DSP's DMel of the WAV, the prompt "
           f"has one placeholder a frame", rc == 0 and ext == dmel
           and prompt.decode() == chat_prompt("what is said?", audio_frames=frames),
           (rc, len(ext), len(dmel), prompt[:200], err[-300:]))
    run = subprocess.run([INKLING, "run", "--model", RANDOM_DEMO, "--prompt", "what is said?", "--audio", DMEL,
                          "-n", "8", "--json", "--threads", "2"], capture_output=True, text=True, check=True)
    reply = json.loads(run.stdout)["text"]
    report("coli run --audio: the answer is inkling run's with the committed frames",
           out == reply + "\n" and reply != "", (out, reply))

    # -- under tmux: :help, Ctrl-D (the default model) ------------------------------------------------
    with Pane(f"{COLI} chat --no-attach --temperature 0 --max-tokens 64") as pane:
        started = pane.wait_for(r"(?m)you> ?$", 120) is not None
        pane.keys(":help", "Enter")
        shown = pane.wait_for(r"Ctrl-C\s+stop the current answer", 30, after=":help")
        helped = shown is not None and all(
            re.search(rf"^\s+{re.escape(c)}\s", shown.split(":help", 1)[1], re.M)
            for c in (":reset", ":audio F.wav", ":stats", ":help", ":q"))
        report("tmux: :help lists :reset, :audio, :stats, :help, :q and Ctrl-C", started and helped,
               (shown or pane.text())[-800:])
        pane.keys(golden["prompt_text"], "Enter")
        answered = pane.wait_for(r"\[\d+ tokens, ", 120, after=golden["prompt_text"])
        report("tmux: the default model answers as the reference does",
               answered is not None and golden_answer.splitlines()[0] in answered.split(golden["prompt_text"])[-1],
               (answered or pane.text())[-600:])
        pane.keys("C-d")
        status = pane.exit_status(30)
        report(f"tmux: Ctrl-D at the prompt quits (exit {status})", status == 0, pane.text()[-300:])

    # -- under tmux, attached: Ctrl-C stops and the gateway cancels; a second Ctrl-C quits ----------------
    # The engine holds a request after 16 tokens until a STOP or CANCEL names it
    # (--fault-hold-after), so the answer is in flight when Ctrl-C comes.
    gw = Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", RANDOM_DEMO, "--slots", "1", "--ctx", "4096",
                  "--max-tokens", "1000", "--threads", "2", "--engine-arg=--fault-hold-after=16"], ready_timeout=120)
    try:
        url = f"http://127.0.0.1:{gw.port}"
        with Pane(f"{COLI} chat --attach {url} --max-tokens 1000") as pane:
            attached = pane.wait_for(r"(?m)you> ?$", 60)
            pane.keys("Tell me everything", "Enter")
            # Streaming: any text on a line after the prompt's (the random model's sampled words
            # need not hold ten letters in a row, and it stops at 16 tokens), no footer yet.
            streaming = pane.wait_for(r"\n\s*\S", 60, after="Tell me everything")
            pane.keys("C-c")
            stopped = pane.wait_for(r"tokens, .*stopped\]", 60)
            deadline, cancels, active = time.time() + 60, None, None
            while time.time() < deadline:
                cancels, active = metric(gw, "inkling_client_cancels_total"), metric(gw, "inkling_requests_active")
                if cancels == 1 and active == 0:
                    break
                time.sleep(0.05)
            shown = re.findall(r"\[(\d+) tokens, .*stopped\]", stopped or "")
            tokens = int(shown[-1]) if shown else None
            report("tmux, attached: Ctrl-C stops the streaming answer (footer says stopped)",
                   attached is not None and f"gateway {url}" in attached and streaming is not None
                   and stopped is not None, pane.text()[-600:])
            report(f"tmux, attached: the gateway cancels the request (client cancels {cancels}, active {active}; "
                   f"the footer counts {tokens} tokens streamed, at most the 16 before the hold)",
                   cancels == 1 and active == 0 and tokens is not None and 0 < tokens <= 16, (cancels, active, tokens))
            # The second Ctrl-C once the prompt is back.
            prompt_back = pane.wait_for(r"(?m)stopped\]\s*\nyou> ?$", 30)
            pane.keys("C-c")
            status = pane.exit_status(30)
            report(f"tmux, attached: a second Ctrl-C quits (exit {status})", prompt_back is not None and status == 0,
                   pane.text()[-300:])
    finally:
        gw.stop()
finally:
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(checks.finish())
