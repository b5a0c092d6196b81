#!/usr/bin/env python3
"""docs/configuration.md against the declarations and the binaries (the options-doc suite):

1. the committed file is what build/inkling-options-doc generates from the four
   options.cpp; a table row that differs is named by its flag (declared but missing from
   the doc, or in the doc with no declaration);
2. each binary's `[COMMAND] --help` lists exactly the flags the doc gives that command, so a
   flag registered in a main.cpp past the declarations fails too;
3. the binaries' sources call no getenv but protocol/cli/env.cpp's.

Usage: options_doc_test.py BUILD. Prints PASS/FAIL lines for tests/run_all.sh;
`make options-doc` rewrites the doc from the declarations.
"""
import os
import re
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
doc_path = os.path.join(root, "docs", "configuration.md")
failed = 0


def check(ok, what, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failed += 1
        if detail:
            print("    " + detail)


def split_cells(line):
    """The cells of a Markdown table row; an escaped \\| stays inside its cell."""
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [c.strip() for c in cells]


def rows_by_section(text):
    """{section: {key: cells}} for every table row, and the lines outside tables.
    A row's key is its first cell, plus its commands cell where the table has one
    (inkling's --threads is declared once for the model commands and once for convert)."""
    sections, prose, section, header = {}, [], "", None
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("## "):
            section, header = line[3:].strip("` "), None
            sections.setdefault(section, {})
        if not line.startswith("|"):
            prose.append((n, line))
            header = None
            continue
        cells = split_cells(line)
        if header is None:
            header = cells
            continue
        if set(line) <= set("|-"):
            continue
        key = (cells[0], cells[1]) if len(header) > 1 and header[1] == "commands" else (cells[0],)
        sections.setdefault(section, {})[key] = dict(zip(header, cells))
    return sections, prose


gen = subprocess.run([os.path.join(build, "inkling-options-doc")], capture_output=True, text=True)
check(gen.returncode == 0, "inkling-options-doc accepts the declarations", gen.stderr.strip())
if gen.returncode != 0:
    sys.exit(1)
with open(doc_path, encoding="utf-8") as f:
    committed = f.read()
want, want_prose = rows_by_section(gen.stdout)
have, have_prose = rows_by_section(committed)
hint = "(make options-doc regenerates docs/configuration.md from the declarations)"

# 1. row by row, named by the flag
for section in want:
    problems = []
    for key, cells in want[section].items():
        got = have.get(section, {}).get(key)
        if got is None:
            problems.append(f"{section} {' '.join(key)} is declared but missing from docs/configuration.md")
        elif got != cells:
            diff = [f"{col}: doc '{got.get(col)}', declared '{v}'" for col, v in cells.items() if got.get(col) != v]
            problems.append(f"{section} {key[0]}: " + "; ".join(diff))
    for key in have.get(section, {}):
        if key not in want[section]:
            problems.append(f"docs/configuration.md lists {' '.join(key)} under {section}, which nothing declares")
    check(not problems, f"docs/configuration.md: {section} ({len(want[section])} rows) matches the declarations",
          "\n    ".join(problems + [hint]))
for section in have:
    check(section in want, f"docs/configuration.md: section {section} comes from the declarations", hint)
prose_diff = [f"line {n}: '{line}'" for (n, line), (_, w) in zip(have_prose, want_prose) if line != w]
if len(have_prose) != len(want_prose):
    prose_diff.append(f"{len(have_prose)} lines outside tables, {len(want_prose)} generated")
check(not prose_diff, "docs/configuration.md: the text outside the tables is the generated text",
      "\n    ".join(prose_diff[:5] + [hint]))

# 2. each binary's --help against the doc's rows for that command
# cxxopts writes "  -h, --help", "      --model DIR" or "  -n N"; a wrapped description
# line is indented further, so "--kernels: …" inside one is no flag.
FLAG = re.compile(r"^  (?:-(\w), |    )--([a-z0-9][a-z0-9-]*)|^  -(\w) ")


def help_flags(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    flags = set()
    for line in p.stdout.split("\n"):
        m = FLAG.match(line)
        if m:
            flags.add(m.group(2) or m.group(3))
    return p.returncode, flags


def doc_flags(section, command):
    flags = set()
    for key, cells in want.get(section, {}).items():
        names = re.findall(r"`--?([a-z0-9][a-z0-9-]*)", key[0])
        if not names:  # a positional
            continue
        applies = command is None or cells.get("commands") == "all" or \
            command in [c.strip() for c in cells.get("commands", "").split(",")]
        if applies:
            flags.add(names[-1])
    return flags


binaries = [("inkling", ["run", "serve", "eval", "info", "bench", "convert"]),
            ("inkling-gateway", [None]), ("coli", ["chat", "run", "serve"]), ("inkling-dmel", [None])]
for binary, commands in binaries:
    for command in commands:
        argv = [os.path.join(build, binary)] + ([command] if command else []) + ["--help"]
        rc, got = help_flags(argv)
        expected = doc_flags(binary, command)
        label = " ".join([binary] + ([command] if command else []))
        check(rc == 0 and got == expected, f"{label} --help lists the flags docs/configuration.md gives it",
              f"exit {rc}; only in --help: {sorted(got - expected)}; only in the doc: {sorted(expected - got)}")

# 3. one getenv
CALL = re.compile(r"\b(?:secure_)?getenv\s*\(")
stray = []
for top in ("engine", "gateway", "protocol", os.path.join("tools", "coli"), os.path.join("tools", "dmel"),
            os.path.join("tools", "options-doc")):
    for dirpath, _, files in os.walk(os.path.join(root, top)):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if not name.endswith((".cpp", ".h", ".c")) or rel == os.path.join("protocol", "cli", "env.cpp"):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if CALL.search(line):
                        stray.append(f"{rel}:{n}")
check(not stray, "the binaries read the environment only through protocol/cli/env.cpp",
      "getenv at " + ", ".join(stray) + " (declare the variable in the binary's options.cpp, read it with cli::env)")

sys.exit(1 if failed else 0)
