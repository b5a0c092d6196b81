#!/usr/bin/env bash
# `make run`: the demo model (the real Inkling vocabulary and TMLv0 tokens, tiny random
# layers, so its replies are not yet language) answers one turn through coli, then — on a
# terminal — the chat stays open: type, Ctrl-C stops an answer, :q quits.
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/make-tiny/ensure_demo.sh" "$build"
demo="$build/demo-model"
prompt="${PROMPT:-Hello! What can you do?}"
echo "== you: $prompt"
"$build/coli" run "$prompt" --no-attach --model "$demo" --max-tokens 24 --temperature 0.8
echo
if [[ -t 0 && -t 1 ]]; then
    echo "== chatting with the demo model (:help for commands, :q to quit)"
    exec "$build/coli" chat --no-attach --model "$demo" --max-tokens 200
fi
echo "== to chat:          $build/coli chat --model $demo"
echo "== to serve the API: $build/coli serve --model $demo --port 8000   (then: $build/coli chat)"
