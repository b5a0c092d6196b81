#!/usr/bin/env bash
# Writes every tiny test fixture into OUTDIR unless they are already there and newer than
# the generator. Deterministic: the same bytes on every machine (numpy's integer math).
set -euo pipefail
out="${1:?usage: ensure.sh OUTDIR}"
here="$(cd "$(dirname "$0")" && pwd)"
stamp="$out/.stamp"
if [[ -f "$stamp" && "$stamp" -nt "$here/make_tiny.py" ]]; then exit 0; fi
rm -rf "$out"
mkdir -p "$out"
/usr/bin/python3 "$here/make_tiny.py" --all "$out"
touch "$stamp"
