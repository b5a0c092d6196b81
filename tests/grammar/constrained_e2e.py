#!/usr/bin/env python3
"""constrained_e2e.py [BUILD]: constrained decoding through the real engine (`inkling serve`
on the trained demo model models/inkling-demo, and on build/demo-model, whose tokenizer is
Inkling's 200k o200k vocabulary). A SUBMIT with grammar=N (PROTOCOL.md §12.3):

- a JSON Schema, 50 seeds at temperature 1: every output parses and validates against the
  schema (python3-jsonschema, formats checked), and ends by EOS, not by max_tokens (the
  schema bounds every string and array, so the language is finite and the budget ample);
- the same at temperature 0 and with top_p/top_k;
- a grammar forcing an Inkling tool call (name, <|content_invoke_tool_json|>, the
  {"name","args"} envelope, <|end_message|>): the call is there and its args validate;
- audio and a grammar in one extension (DMel bytes first, the grammar last) on the model with an
  audio tower: the audio is taken and the output follows the grammar;
- a schema the compiler refuses: ERROR BAD_REQUEST naming the construct, and the engine
  serves on; grammar=N past the extension: BAD_REQUEST.
PASS/FAIL lines; exit 0 when all pass.
"""
import json
import os
import sys

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from lib import Checks, Engine  # noqa: E402
from lib import wire  # noqa: E402

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
checks = Checks("constrained decoding e2e")

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
        "when": {"type": "string", "format": "date"},
        "score": {"type": ["number", "null"]},
        "home": {"anyOf": [{"type": "null"},
                           {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                                             "zip": {"type": "integer"}},
                            "required": ["city", "zip"], "additionalProperties": False}]},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "code", "age", "color", "tags", "when", "score", "home", "ok"],
    "additionalProperties": False,
}
ARGS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}
TOOL = {"type": "repeat", "min": 1, "max": 1, "item": {"type": "sequence", "items": [
    {"type": "text", "text": "get_weather"},
    {"type": "token", "token": "<|content_invoke_tool_json|>"},
    {"type": "text", "text": '{"name":"get_weather","args":'},
    {"type": "json_schema", "schema": ARGS, "whitespace": "none", "key_order": "sorted"},
    {"type": "text", "text": "}"},
    {"type": "token", "token": "<|end_message|>"}]}}
PROMPT = ("<|message_system|><|content_text|>Thinking effort level: 0<|end_message|><|message_user|><|content_text|>"
          "Describe a person as JSON.<|end_message|><|message_model|><|content_text|>")
TOOL_PROMPT = ("<|message_system|><|content_text|>Thinking effort level: 0<|end_message|><|message_user|><|content_text|>"
               "What is the weather in Paris?<|end_message|><|message_model|>")
validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def run(eng, rid, prompt, grammar, max_tokens, temperature, top_p=1, audio=b"", **keys):
    """(text, end frame) of one constrained request; `audio`: DMel bytes before the grammar."""
    g = json.dumps(grammar).encode() if not isinstance(grammar, bytes) else grammar
    eng.send(wire.submit(rid, 0, prompt, max_tokens, temperature=temperature, top_p=top_p, ext=audio + g, grammar=len(g),
                         **keys))
    text = b""
    while True:
        f = eng.frame()
        if len(f.fields) > 1 and f.fields[1] == rid:
            if f.kind == "DATA":
                text += f.payload
            elif f.kind in ("DONE", "ERROR"):
                return text.decode("utf-8", errors="replace"), f


def valid(text):
    try:
        doc = json.loads(text)
    except ValueError as e:
        return f"not JSON: {e}"
    errors = [e.message for e in validator.iter_errors(doc)]
    return "; ".join(errors) if errors else None


def schema_runs(eng, label, seeds, temperature, top_p=1, **keys):
    node = {"type": "json_schema", "schema": SCHEMA}
    bad = []
    for seed in range(seeds):
        text, end = run(eng, f"s{seed}", PROMPT, node, 1500, temperature, top_p, seed=seed, **keys)
        why = "ERROR " + " ".join(end.fields[2:]) if end.kind == "ERROR" else valid(text)
        if why is None and end.fields[8] != "0":
            why = "ended by max_tokens"
        if why:
            bad.append((seed, why, text[:300]))
    checks.report(f"{label}: {seeds} outputs parse and validate against the schema and end by EOS", not bad, bad[:3])


def tool_runs(eng, label, seeds):
    bad = []
    head = "get_weather<|content_invoke_tool_json|>"
    tail = "<|end_message|>"
    for seed in range(seeds):
        text, end = run(eng, f"t{seed}", TOOL_PROMPT, TOOL, 200, 1.0, seed=seed)
        why = None
        if end.kind != "DONE" or end.fields[8] != "0":
            why = f"ended {end.fields}"
        elif not (text.startswith(head) and text.endswith(tail)):
            why = "not a call envelope"
        else:
            env = json.loads(text[len(head):-len(tail)])
            if list(env) != ["name", "args"] or env["name"] != "get_weather":
                why = f"envelope {env}"
            else:
                errs = [e.message for e in jsonschema.Draft202012Validator(ARGS).iter_errors(env["args"])]
                why = "; ".join(errs) or None
        if why:
            bad.append((seed, why, text[:300]))
    checks.report(f"{label}: a forced tool call on {seeds} seeds is the Inkling envelope with valid args", not bad, bad[:3])


def refusals(eng, label):
    node = {"type": "json_schema", "schema": {"type": "object", "properties": {"x": {"type": "integer", "multipleOf": 3}}}}
    _, end = run(eng, "bad", PROMPT, node, 10, 0)
    detail = " ".join(end.fields[3:])
    checks.report(f"{label}: a refused schema is ERROR BAD_REQUEST naming the construct and where",
                  end.kind == "ERROR" and end.fields[2] == "BAD_REQUEST" and "'multipleOf'" in detail
                  and "/properties/x" in detail, end.fields)
    eng.send(b"SUBMIT big 0 2 4 0 1 3 grammar=4\nhi{}}\n")
    f = eng.frame()
    checks.report(f"{label}: grammar=N past the extension is BAD_REQUEST", f.kind == "ERROR" and f.fields[2] == "BAD_REQUEST"
                  and "grammar" in " ".join(f.fields), f.fields)
    text, end = run(eng, "after", PROMPT, {"type": "json_schema", "schema": {"type": "boolean"}}, 10, 0)
    checks.report(f"{label}: the engine serves on", end.kind == "DONE" and text in ("true", "false"), (text, end.fields))


for label, model, seeds in (("inkling-demo", os.path.join(ROOT, "models", "inkling-demo"), 50),
                            ("o200k demo-model", os.path.join(build, "demo-model"), 10)):
    eng = Engine([os.path.join(build, "inkling"), "serve", "--model", model, "--slots", "1", "--ctx", "2048",
                  "--threads", "2"])
    eng.frame()  # the info STATS
    schema_runs(eng, f"{label} temperature 1", seeds, 1.0)
    schema_runs(eng, f"{label} greedy", 1, 0)
    schema_runs(eng, f"{label} temperature 0.8 top_p 0.9 top_k 40", 5, 0.8, top_p=0.9, top_k=40)
    tool_runs(eng, label, 10)
    if label.startswith("o200k"):
        with open(os.path.join(model, "sample.dmel"), "rb") as f:
            dmel = f.read()
        frames = len(dmel) // 80
        prompt = ("<|message_user|><|content_audio_input|>" + "<|audio|>" * frames + "<|audio_end|><|end_message|>"
                  "<|message_model|><|content_text|>")
        node = {"type": "json_schema", "schema": {"enum": ["speech", "music", "silence"]}}
        text, end = run(eng, "audio", prompt, node, 20, 1.0, audio=dmel, seed=1)
        checks.report(f"{label}: {frames} DMel frames then a grammar in one extension: the output follows the grammar",
                      end.kind == "DONE" and end.fields[7] == str(frames + 6) and text in ('"speech"', '"music"', '"silence"'),
                      (text, end.fields))
    refusals(eng, label)
    eng.close()
sys.exit(checks.finish())
