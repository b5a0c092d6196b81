#!/usr/bin/env bash
# ensure.sh OUTDIR: makes sure OUTDIR/tokenizer.json exists and is current — installs the
# npm packages if needed, then (re)generates the file when it is missing or older than the
# generator or its lock file. Fast when there is nothing to do.
set -euo pipefail
if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
out="$1/tokenizer.json"
"$here/install.sh"
if [[ -f "$out" && ! "$here/make_tokenizer.mjs" -nt "$out" && ! "$here/package-lock.json" -nt "$out" ]]; then
    exit 0
fi
mkdir -p "$1"
node "$here/make_tokenizer.mjs" "$out"
