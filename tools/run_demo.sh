#!/usr/bin/env bash
# `make run`: what the project serves today — the Inkling engine on the demo model,
# chatting one turn through `inkling run --chat` with the real o200k-based tokenizer.
# The demo model has the real vocabulary and TMLv0 tokens but tiny random layers, so its
# reply is not yet language.
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/make-tiny/ensure_demo.sh" "$build"
demo="$build/demo-model"
prompt="${PROMPT:-Hello! What can you do?}"
echo "== inkling info"
"$build/inkling" info --model "$demo" | head -8
echo "== you: $prompt"
printf "== inkling: "
"$build/inkling" run --model "$demo" --chat --prompt "$prompt" -n 24 --temperature 0.8 --seed 1
echo "== to chat yourself: $build/inkling run --model $demo --chat --prompt \"...\""
