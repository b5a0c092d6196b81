"""The include graph against the layering: a folder includes only the folders below it.

    platform/    nothing of ours
    protocol/    platform/
    grammar/     protocol/, platform/
    engine/      grammar/, protocol/, platform/
    gateway/     grammar/, protocol/, platform/   (never engine/: the two processes are siblings)
    tools/coli/  protocol/, platform/            (never gateway/ nor engine/)
    tools/       anything but tests/
    shaders/     shaders/ only
    tests/       anything

Usage: check_layers.py [ROOT]  (ROOT defaults to this source tree). Reads every `#include "…"`
of the tree's sources (git's tracked files and the untracked ones it does not ignore; every
file under ROOT when ROOT is not a git checkout) and resolves each as the compiler does: next
to the including file first, then from ROOT (the include directory every target has), then
from tests/ (the unit tests'). Includes that name no file of the tree (system and third-party
headers) are not ours and are left alone. Prints one PASS or FAIL line per rule, each FAIL
followed by the offending includes as FILE:LINE; exits 1 when a rule fails.
"""
import os
import re
import subprocess
import sys

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".c", ".inc", ".comp", ".glsl")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
# Folders that are build outputs or package caches, skipped when ROOT is not a git checkout.
NOT_SOURCES = {".git", "node_modules"}

# (the files a rule governs, what they may include, the rule in words). A file is governed by
# the first rule whose folder holds it; its own folder is always allowed.
LAYERS = ["platform/", "protocol/", "grammar/", "engine/", "gateway/", "tools/", "shaders/", "tests/"]
RULES = [
    ("platform/", [], "includes nothing of ours"),
    ("protocol/", ["platform/"], "includes only platform/"),
    ("grammar/", ["protocol/", "platform/"], "includes only protocol/, platform/"),
    ("engine/", ["grammar/", "protocol/", "platform/"], "includes only grammar/, protocol/, platform/"),
    ("gateway/", ["grammar/", "protocol/", "platform/"], "includes only grammar/, protocol/, platform/ (never engine/)"),
    ("tools/coli/", ["protocol/", "platform/"], "includes only protocol/, platform/ (never gateway/ nor engine/)"),
    ("tools/", ["platform/", "protocol/", "grammar/", "engine/", "gateway/"], "includes no tests/"),
    ("shaders/", [], "includes only shaders/"),
]


def source_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for top, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in NOT_SOURCES and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(top, n), root).replace(os.sep, "/") for n in names]
    return sorted(set(files))


def resolve(including, target, tree):
    """The tree's file that `#include "target"` in `including` reads, or None."""
    for base in (os.path.dirname(including), "", "tests"):
        path = os.path.normpath(os.path.join(base, target)).replace(os.sep, "/")
        if path in tree:
            return path
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    files = source_files(root)
    tree = set(files)
    violations = {folder: [] for folder, _, _ in RULES}
    counted = {folder: 0 for folder, _, _ in RULES}
    for f in files:
        if not f.endswith(SOURCE_SUFFIXES):
            continue
        rule = next((r for r in RULES if f.startswith(r[0])), None)
        if rule is None:
            continue  # tests/ (anything) and files outside the layers
        folder, allowed, _ = rule
        counted[folder] += 1
        try:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                lines = fh.readlines()
        except FileNotFoundError:
            continue  # deleted in the work tree, not yet in git
        for n, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            path = resolve(f, m.group(1), tree)
            if path is None or path.startswith(folder):
                continue
            layer = next((layer for layer in LAYERS if path.startswith(layer)), None)
            if layer is None or layer in allowed:
                continue  # not a layer of ours (models/, docs/), or one below
            violations[folder].append(f"  {f}:{n}: #include \"{m.group(1)}\" ({layer})")
    failed = False
    for folder, _, words in RULES:
        bad = violations[folder]
        if bad:
            failed = True
            print(f"FAIL layering {folder} {words}: {len(bad)} include(s) of {counted[folder]} files break it")
            print("\n".join(bad))
        else:
            print(f"PASS layering {folder} {words} ({counted[folder]} files)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
