#!/usr/bin/env bash
# `make run`: the committed demo model (models/inkling-demo: 7.6M parameters trained on
# fortune cookies, every layer kind of Inkling; see its README.md) answers one turn
# through coli, then — on a terminal — the chat stays open: type, Ctrl-C stops an answer,
# :q quits. MODEL=DIR runs another model.
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
demo="${MODEL:-$root/models/inkling-demo}"
prompt="${PROMPT:-Hello! What can you do?}"
echo "== you: $prompt"
"$build/coli" run "$prompt" --no-attach --model "$demo" --max-tokens 160 --temperature 0.7
echo
if [[ -t 0 && -t 1 ]]; then
    echo "== chatting with the demo model (:help for commands, :q to quit)"
    exec "$build/coli" chat --no-attach --model "$demo" --max-tokens 200
fi
echo "== to chat:          $build/coli chat --model $demo"
echo "== to serve the API: $build/coli serve --model $demo --port 8000   (then: $build/coli chat)"
