#!/usr/bin/env bash
# Writes the demo model into BUILD/demo-model unless it is there and current: tiny random
# layers on the real Inkling vocabulary, with the o200k-based tokenizer.json beside it.
set -euo pipefail
build="${1:?usage: ensure_demo.sh BUILD}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/tools/make-tokenizer/ensure.sh" "$build/o200k-inkling"
demo="$build/demo-model"
if [[ ! -f "$demo/.stamp" || "$root/tools/make-tiny/make_tiny.py" -nt "$demo/.stamp" ]]; then
    /usr/bin/python3 "$root/tools/make-tiny/make_tiny.py" "$demo" --geometry demo --layout release --dtype bf16
    touch "$demo/.stamp"
fi
if ! cmp -s "$build/o200k-inkling/tokenizer.json" "$demo/tokenizer.json"; then
    cp "$build/o200k-inkling/tokenizer.json" "$demo/tokenizer.json"
fi
