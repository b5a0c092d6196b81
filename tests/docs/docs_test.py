#!/usr/bin/env python3
"""Checks that the repository's text stands on its own and states the present.

  python3 tests/docs/docs_test.py [REPO_ROOT]

Over every tracked text file (git ls-files; every file below the root when git is not
there), three checks, each one PASS or FAIL line (tests/run_all.sh counts them):

  no-outside-pointers   no path into the design notes kept beside the checkout (the shared
                        specs and seeds, the design and style notes, the spec files by name):
                        a reader of the repository cannot open them. What a reader needs goes
                        into docs/, with its public source named.
  no-session-citations  no work session cited by its number (the word, a space or a hyphen,
                        then a number; or a range or pair of them): a figure names the command
                        that reproduces it or the doc that holds it, not when it was measured.
                        "session" as a chat session (a count of them before a ratio, the values
                        of --sessions) is left alone.
  doc-links             every relative link in a Markdown file reaches a file, and its
                        #anchor a heading of that file (GitHub's anchor rules).

A FAIL line names each offending file:line. Reads text only; takes well under a second.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
SELF = os.path.relpath(os.path.abspath(__file__), ROOT)
MAX_BYTES = 2 << 20  # larger files are data (goldens, the demo model's tokenizer), not text to read

# Built from parts so that this file does not match itself when it is read.
_SPEC_NAMES = ["agent-apis", "agent-clients", "api-and-peers", "constrained-decoding", "cpu-baselines",
               "device-notes", "dmel-audio", "inkling-model", "inkling-reference-notes", "inkling-tokens-and-mtp"]
OUTSIDE = re.compile("|".join([
    r"shared/(?:specs|seeds)\b",
    r"\.\./shared\b",
    r"/work/" + r"shared\b",
    r"\b(?:DESIGN|STYLE)" + r"\.md\b",
    r"(?<![\w./-])spec" + r"s/",
    r"\b(?:" + "|".join(map(re.escape, _SPEC_NAMES)) + r")\.md\b",
]))
# The word, a space or hyphen and a number of one or two digits (its possessive too); the plural
# with a range or a pair of such numbers. Not a count of chat sessions before a ratio or a
# rate (a decimal, ×, tok/s), nor a flag's values (a comma-separated list after --sessions).
SESSION = re.compile("|".join([
    r"(?<!-)\bsession[ -]\d{1,2}(?!\d|[.,]\d|\s*[×/%])",
    r"(?<!-)\bsessions \d{1,2}\s?[–-]\s?\d{1,2}(?!\d|[.,]\d|\s*(?:tok|GB|×|x\b|ms|%))",
    r"(?<!-)\bsessions \d{1,2} (?:and|or) \d{1,2}\b",
]), re.IGNORECASE)


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True, timeout=30).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.SubprocessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "node_modules"]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
        return files


def read_text(rel):
    path = os.path.join(ROOT, rel)
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_BYTES:
            return None
        data = open(path, "rb").read()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def scan(texts, pattern):
    bad = []
    for rel, text in texts.items():
        if rel == SELF:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = pattern.search(line)
            if m:
                bad.append(f"{rel}:{n}: {m.group(0)!r} in: {line.strip()[:160]}")
    return bad


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped (word characters, spaces
    and hyphens stay), spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    seen, out, fence = {}, set(), False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else f"{s}-{k}")
    return out


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def check_links(texts, files):
    known = set(files)
    bad, cache = [], {}
    for rel, text in texts.items():
        if not rel.endswith(".md"):
            continue
        fence = False
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                fence = not fence
            if fence:
                continue
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                    continue  # http:, https:, mailto:
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
                if path and dest not in known and not os.path.exists(os.path.join(ROOT, dest)):
                    bad.append(f"{rel}:{n}: no file {dest} (link {target})")
                    continue
                if frag and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(texts.get(dest) or read_text(dest) or "")
                    if frag not in cache[dest]:
                        bad.append(f"{rel}:{n}: no heading #{frag} in {dest}")
    return bad


def report(name, bad):
    if bad:
        print(f"FAIL {name}: {len(bad)} found")
        for b in bad[:50]:
            print("  " + b)
    else:
        print(f"PASS {name}")
    return not bad


def main():
    files = tracked_files()
    texts = {}
    for rel in files:
        t = read_text(rel)
        if t is not None:
            texts[rel] = t
    ok = report("no-outside-pointers", scan(texts, OUTSIDE))
    ok &= report("no-session-citations", scan(texts, SESSION))
    ok &= report("doc-links", check_links(texts, files))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
